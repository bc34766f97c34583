//! The generated tools and the labelled tasks, without the server: shared
//! by the tool-search tests and the `tool_search` bench.
#![allow(dead_code)]

/// (name part, what a person calls one, many).
pub const SUBJECTS: [(&str, &str, &str); 30] = [
    ("weather", "weather forecast", "weather forecasts"),
    ("calendar_event", "calendar event", "calendar events"),
    ("email", "email message", "email messages"),
    ("invoice", "invoice", "invoices"),
    ("customer", "customer", "customers"),
    ("order", "order", "orders"),
    ("product", "product", "products"),
    ("shipment", "shipment parcel", "shipments"),
    ("ticket", "support ticket", "support tickets"),
    ("repository", "code repository", "code repositories"),
    ("pull_request", "pull request", "pull requests"),
    ("bug_report", "bug report", "bug reports"),
    ("deployment", "deployment release", "deployments"),
    ("database_backup", "database backup", "database backups"),
    ("user_account", "user account", "user accounts"),
    ("api_key", "API key", "API keys"),
    ("document", "document file", "documents"),
    ("folder", "folder", "folders"),
    ("photo", "photo picture", "photos"),
    ("playlist", "music playlist", "playlists"),
    ("song", "song track", "songs"),
    ("flight", "flight", "flights"),
    (
        "hotel_booking",
        "hotel booking reservation",
        "hotel bookings",
    ),
    ("expense", "expense receipt", "expenses"),
    ("payroll", "payroll salary payment", "payroll runs"),
    ("meeting_room", "meeting room", "meeting rooms"),
    ("recipe", "cooking recipe", "recipes"),
    ("workout", "workout exercise session", "workouts"),
    ("stock_quote", "stock price quote", "stock quotes"),
    ("news_article", "news article", "news articles"),
];

/// (verb, description with the words people use for it; {one} and {many}
/// are the subject's).
pub const ACTIONS: [(&str, &str); 10] = [
    (
        "get",
        "Get one {one}: fetch, show or look up a single {one} by its id or name.",
    ),
    ("list", "List all {many}, newest first."),
    ("create", "Create a new {one}: add, make or book one."),
    ("update", "Update a {one}: change, edit, rename or fix it."),
    ("delete", "Delete a {one}: remove or erase it for good."),
    (
        "search",
        "Search {many}: find the ones matching some words.",
    ),
    ("export", "Export {many} to a CSV or PDF file to download."),
    (
        "archive",
        "Archive an old {one}: hide it away without deleting it.",
    ),
    (
        "share",
        "Share a {one} with someone by sending them a link.",
    ),
    (
        "count",
        "Count {many}: how many there are, the total number.",
    ),
];

/// Every generated tool: (name, description, read-only).
pub fn catalog() -> Vec<(String, String, bool)> {
    let mut tools = Vec::with_capacity(300);
    for (subject, one, many) in SUBJECTS {
        for (verb, description) in ACTIONS {
            let read_only = matches!(verb, "get" | "list" | "search" | "count" | "export");
            tools.push((
                format!("{verb}_{subject}"),
                description.replace("{one}", one).replace("{many}", many),
                read_only,
            ));
        }
    }
    tools
}

/// `n` generated tools (up to 1,200): the 300 of [`catalog`], then the
/// same for other regions (`get_weather_eu`, …).
pub fn catalog_of(n: usize) -> Vec<(String, String, bool)> {
    let mut tools = Vec::with_capacity(n);
    for region in ["", "_eu", "_us", "_asia"] {
        for (name, description, read_only) in catalog() {
            let place = if region.is_empty() {
                String::new()
            } else {
                format!(" ({})", &region[1..])
            };
            tools.push((
                format!("{name}{region}"),
                format!("{description}{place}"),
                read_only,
            ));
        }
    }
    tools.truncate(n);
    tools
}

/// 50 tasks as a person would ask them, each with the tool that does it.
pub const TASKS: [(&str, &str); 50] = [
    (
        "What's the weather forecast for Lisbon tomorrow?",
        "get_weather",
    ),
    (
        "Remove invoice INV-42, it was sent by mistake",
        "delete_invoice",
    ),
    ("How many customers do we have in total?", "count_customer"),
    ("Show me all my email messages, newest first", "list_email"),
    ("Book a new flight to Oslo on Friday", "create_flight"),
    (
        "Find support tickets that mention the login page",
        "search_ticket",
    ),
    ("Rename the marketing folder to Campaigns", "update_folder"),
    (
        "Export all expenses of March to a CSV file",
        "export_expense",
    ),
    ("Share the holiday photo with my sister", "share_photo"),
    (
        "Archive the old pull request about caching",
        "archive_pull_request",
    ),
    (
        "Add a calendar event for the dentist on Monday",
        "create_calendar_event",
    ),
    ("Look up order 1234 and show it to me", "get_order"),
    ("Erase the API key that leaked yesterday", "delete_api_key"),
    ("Make a new music playlist for running", "create_playlist"),
    (
        "What is the current stock price quote of ACME?",
        "get_stock_quote",
    ),
    ("List every code repository we have", "list_repository"),
    (
        "Find news articles about the election",
        "search_news_article",
    ),
    ("Count how many songs are in the library", "count_song"),
    (
        "Change the hotel booking to two nights",
        "update_hotel_booking",
    ),
    (
        "Create a support ticket: the printer is broken",
        "create_ticket",
    ),
    ("Download all invoices as a PDF", "export_invoice"),
    (
        "Delete the user account of a former employee",
        "delete_user_account",
    ),
    (
        "Show the deployment release from this morning",
        "get_deployment",
    ),
    ("Search products for blue running shoes", "search_product"),
    (
        "Send a link to the budget document to Dana",
        "share_document",
    ),
    ("How many meeting rooms are there?", "count_meeting_room"),
    ("Fix the typo in the pancake recipe", "update_recipe"),
    (
        "Log a new workout exercise session: 5 km run",
        "create_workout",
    ),
    (
        "Hide away the old database backup from 2021",
        "archive_database_backup",
    ),
    ("List all shipments, newest first", "list_shipment"),
    ("Add a new customer named Acme Corp", "create_customer"),
    (
        "Edit the bug report about the crash on start",
        "update_bug_report",
    ),
    ("Get the payroll salary payment run for May", "get_payroll"),
    (
        "Search my email messages for the word contract",
        "search_email",
    ),
    ("Remove the song track I added by accident", "delete_song"),
    ("Total number of open orders?", "count_order"),
    ("Share the playlist with the team", "share_playlist"),
    (
        "Export the calendar events of this week to a file",
        "export_calendar_event",
    ),
    (
        "Archive the news article from last year",
        "archive_news_article",
    ),
    ("Fetch the code repository called lrg", "get_repository"),
    ("Find photos from the beach trip", "search_photo"),
    ("Create a new folder for receipts", "create_folder"),
    ("Delete the expense receipt for the taxi", "delete_expense"),
    ("List the user accounts", "list_user_account"),
    ("Update the product price of the red mug", "update_product"),
    (
        "Count the pull requests waiting for review",
        "count_pull_request",
    ),
    (
        "Create a database backup right now",
        "create_database_backup",
    ),
    (
        "Show the shipment parcel with tracking id 77",
        "get_shipment",
    ),
    ("Search recipes with chocolate", "search_recipe"),
    ("List all flights booked this year", "list_flight"),
];
