//! Matching the tool name a model wrote to the tools it was offered: exact,
//! then loosely (case, `-` for `_`), then by the name's segments with a
//! server or namespace prefix added or left off (`server__tool`,
//! `server.tool`, `functions.tool`, `default_api.tool`, Claude Code's
//! `mcp__server__tool`), as plugable-chat's `parse_combined_tool_name` does.
//! A name that fits several offered ones is never guessed: it is
//! [`NameMatch::Ambiguous`], and the model is told the candidates.

/// How a written tool name maps onto the offered names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameMatch<'a> {
    /// The written name is an offered one.
    Exact(&'a str),
    /// One offered name fits the written one: `how` says why.
    Repaired {
        /// The offered name.
        name: &'a str,
        /// What differed.
        how: Repair,
    },
    /// Several offered names fit equally well (best first, in offered order).
    Ambiguous(Vec<&'a str>),
    /// No offered name fits.
    Unknown,
}

/// What a repaired name differed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Repair {
    /// Letter case, or `-` written for `_` (`Get_Weather`, `get-weather`).
    Case,
    /// A prefix added or left off (`functions.get_weather`, `server__tool`,
    /// `mcp__server__tool`, or `tool` for an offered `server__tool`).
    Prefix,
}

impl<'a> NameMatch<'a> {
    /// The offered name, when exactly one fits.
    pub fn name(&self) -> Option<&'a str> {
        match self {
            NameMatch::Exact(name) | NameMatch::Repaired { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// The offered name that `written` means, if exactly one fits (see
/// [`resolve_tool_name`]).
pub fn match_tool_name<'a>(written: &str, offered: &'a [String]) -> Option<&'a str> {
    resolve_tool_name(written, offered).name()
}

/// How `written` maps onto `offered`: exact; else equal but for case and
/// `-`/`_`; else the offered names whose segments (split at `__`, `.` and
/// `/`) end the written name's, or whose last segments the written name is,
/// the longest overlap winning. Each step that finds more than one name
/// stops at [`NameMatch::Ambiguous`].
pub fn resolve_tool_name<'a>(written: &str, offered: &'a [String]) -> NameMatch<'a> {
    let written = written.trim();
    if written.is_empty() {
        return NameMatch::Unknown;
    }
    if let Some(name) = offered.iter().find(|o| o.as_str() == written) {
        return NameMatch::Exact(name);
    }
    let loose = offered
        .iter()
        .filter(|o| same(o, written))
        .map(String::as_str)
        .collect::<Vec<_>>();
    match loose[..] {
        [name] => {
            return NameMatch::Repaired {
                name,
                how: Repair::Case,
            };
        }
        [_, _, ..] => return NameMatch::Ambiguous(loose),
        [] => {}
    }
    let mut theirs = segments(written);
    // A namespace the API or a client put before every name says nothing
    // about the server.
    while theirs.len() > 1 && GENERIC.iter().any(|g| same(g, theirs[0])) {
        theirs.remove(0);
    }
    // The longest overlap wins, and at one length a name whose segments are
    // all of the written ones (`echo` for `functions.echo`, over `b__echo`).
    let mut best = (0, false);
    let mut found: Vec<&str> = Vec::new();
    for name in offered {
        let ours = segments(name);
        let overlap = common_tail(&theirs, &ours);
        // One side's segments must all be in the overlap: `a__x` does not
        // fit `b__x` (another server's tool of the same name).
        if overlap == 0 || (overlap < theirs.len() && overlap < ours.len()) {
            continue;
        }
        let key = (overlap, overlap == theirs.len() && overlap == ours.len());
        if key > best {
            best = key;
            found.clear();
        }
        if key == best {
            found.push(name);
        }
    }
    match found[..] {
        [] => NameMatch::Unknown,
        [name] => NameMatch::Repaired {
            name,
            how: Repair::Prefix,
        },
        _ => NameMatch::Ambiguous(found),
    }
}

/// Prefixes that name no server: OpenAI's and Harmony's `functions.`,
/// Gemini's `default_api.`, Claude Code's `mcp__`.
const GENERIC: [&str; 4] = ["functions", "default_api", "mcp", "tools"];

/// Equal but for ASCII case and `-` for `_`.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes().zip(b.bytes()).all(|(x, y)| {
            let fold = |c: u8| {
                if c == b'-' {
                    b'_'
                } else {
                    c.to_ascii_lowercase()
                }
            };
            fold(x) == fold(y)
        })
}

/// A name's segments: split at `__`, `.` and `/`, empty ones left out.
fn segments(name: &str) -> Vec<&str> {
    name.split("__")
        .flat_map(|s| s.split(['.', '/']))
        .filter(|s| !s.is_empty())
        .collect()
}

/// How many last segments `a` and `b` share (compared as [`same`]).
fn common_tail(a: &[&str], b: &[&str]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| same(x, y))
        .count()
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
        assert_eq!(m("get-weather"), Some("get_weather"));
        assert_eq!(m("weather__get_weather"), Some("get_weather"));
        assert_eq!(m("functions.get_weather"), Some("get_weather"));
        assert_eq!(m("default_api.Get_Weather"), Some("get_weather"));
        assert_eq!(m("search_issues"), Some("github__search_issues"));
        assert_eq!(m("github.search_issues"), Some("github__search_issues"));
        assert_eq!(
            m("mcp__github__search_issues"),
            Some("github__search_issues")
        );
        assert_eq!(m("gitlab__search_issues"), None, "another server's tool");
        assert_eq!(m("add"), Some("Add"));
        assert_eq!(m("delete_everything"), None);
        assert_eq!(m(""), None);
        assert_eq!(m("x."), None);
    }

    #[test]
    fn what_fits_several_names_is_not_guessed() {
        let offered: Vec<String> = ["github__search", "gitlab__search", "echo", "ECHO"]
            .map(String::from)
            .to_vec();
        let r = |w| resolve_tool_name(w, &offered);
        assert_eq!(
            r("search"),
            NameMatch::Ambiguous(vec!["github__search", "gitlab__search"])
        );
        assert_eq!(
            r("functions.search"),
            NameMatch::Ambiguous(vec!["github__search", "gitlab__search"])
        );
        assert_eq!(
            r("mcp__github__search"),
            NameMatch::Repaired {
                name: "github__search",
                how: Repair::Prefix
            }
        );
        assert_eq!(r("Echo"), NameMatch::Ambiguous(vec!["echo", "ECHO"]));
        assert_eq!(r("ECHO"), NameMatch::Exact("ECHO"));
        let two_servers: Vec<String> = ["echo", "b__echo"].map(String::from).to_vec();
        assert_eq!(
            match_tool_name("functions.echo", &two_servers),
            Some("echo")
        );
        assert_eq!(match_tool_name("b.echo", &two_servers), Some("b__echo"));
    }
}
