//! Matching the tool name a model wrote to the tools it was offered: exact,
//! then case-insensitive, then without a server prefix (`server__tool`,
//! `server.tool`, `functions.tool`), as plugable-chat's
//! `parse_combined_tool_name` does.

/// The offered name that `written` means, if any.
pub fn match_tool_name<'a>(written: &str, offered: &'a [String]) -> Option<&'a str> {
    let written = written.trim();
    if written.is_empty() {
        return None;
    }
    let find = |w: &str| {
        offered
            .iter()
            .find(|o| o.as_str() == w)
            .or_else(|| offered.iter().find(|o| o.eq_ignore_ascii_case(w)))
            .map(String::as_str)
    };
    if let Some(name) = find(written) {
        return Some(name);
    }
    // An offered name may itself carry the prefix (`github__search`), so the
    // written one is also tried with the offered names' own tails.
    let tail = |w: &str| -> Option<String> {
        let cut = w
            .rfind("__")
            .map(|i| i + 2)
            .or_else(|| w.rfind('.').map(|i| i + 1))?;
        Some(w[cut..].to_string())
    };
    if let Some(t) = tail(written).filter(|t| !t.is_empty()) {
        if let Some(name) = find(&t) {
            return Some(name);
        }
        if let Some(name) = offered
            .iter()
            .find(|o| tail(o).is_some_and(|ot| ot.eq_ignore_ascii_case(&t)))
        {
            return Some(name);
        }
    }
    offered
        .iter()
        .find(|o| tail(o).is_some_and(|ot| ot.eq_ignore_ascii_case(written)))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_by_case_and_prefix() {
        let offered: Vec<String> = ["get_weather", "github__search_issues", "Add"]
            .map(String::from)
            .to_vec();
        let m = |w| match_tool_name(w, &offered);
        assert_eq!(m("get_weather"), Some("get_weather"));
        assert_eq!(m("GET_WEATHER"), Some("get_weather"));
        assert_eq!(m("weather__get_weather"), Some("get_weather"));
        assert_eq!(m("functions.get_weather"), Some("get_weather"));
        assert_eq!(m("search_issues"), Some("github__search_issues"));
        assert_eq!(m("github.search_issues"), Some("github__search_issues"));
        assert_eq!(m("add"), Some("Add"));
        assert_eq!(m("delete_everything"), None);
        assert_eq!(m(""), None);
        assert_eq!(m("x."), None);
    }
}
