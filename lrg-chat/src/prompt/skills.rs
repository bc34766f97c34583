//! Skills, as the Agent Skills convention has them: a folder holding
//! `SKILL.md`, whose front matter gives the skill's `name` and
//! `description`, and whose body (with any other files of the folder) says
//! how to do one kind of task. The prompt lists each skill's name and
//! description; the model reads the rest with `load_skill` when a task
//! calls for it.
//!
//! The front matter is read by a small reader of top-level `key: value`
//! lines (quoted values, and `|` / `>` blocks of indented lines), not a YAML
//! parser: `name` and `description` are all that is needed from it.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::cache::{FileCache, cut};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// The most of a skill's body or file that `load_skill` returns (64 KiB).
pub const MAX_SKILL_FILE_BYTES: usize = 64 * 1024;

/// The longest description listed in the prompt, in bytes.
const MAX_DESCRIPTION_BYTES: usize = 1024;

/// One skill found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name, from the front matter.
    pub name: String,
    /// What it is for, from the front matter: what the model picks it by.
    pub description: String,
    /// Its folder.
    pub dir: PathBuf,
}

/// The skills of some folders, each folder holding one skill per subfolder.
/// Read again (only what changed) each time they are listed, so a skill
/// added while a chat runs is offered from the next turn.
#[derive(Debug, Default)]
pub struct Skills {
    roots: Vec<PathBuf>,
    cache: FileCache,
}

impl Skills {
    /// The skills under `roots`, searched in this order: when two have the
    /// same name, the first found is kept. Folders that do not exist are
    /// skipped.
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Self {
        Self {
            roots: roots.into_iter().collect(),
            cache: FileCache::default(),
        }
    }

    /// The folders searched.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Every skill found now, sorted by name. A `SKILL.md` without a valid
    /// `name` and `description` is skipped with a logged warning.
    pub fn list(&self) -> Vec<Skill> {
        let mut found: BTreeMap<String, Skill> = BTreeMap::new();
        for root in &self.roots {
            let Ok(entries) = std::fs::read_dir(root) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            for dir in dirs {
                let file = dir.join(SKILL_FILE);
                let Some(text) = self.cache.read(&file) else {
                    continue;
                };
                match front_matter(&text) {
                    Ok((meta, _)) => match skill_of(&meta, &dir) {
                        Ok(skill) => {
                            found.entry(skill.name.clone()).or_insert(skill);
                        }
                        Err(why) => {
                            tracing::warn!(file = %file.display(), "skill skipped: {why}");
                        }
                    },
                    Err(why) => tracing::warn!(file = %file.display(), "skill skipped: {why}"),
                }
            }
        }
        found.into_values().collect()
    }

    /// What `load_skill` returns: the body of `name`'s `SKILL.md` (without
    /// its front matter), or with `file` that file of the skill's folder.
    /// `file` is a relative path inside the folder: an absolute path, `..`,
    /// or a link that leads out of the folder is refused. Either is cut at
    /// [`MAX_SKILL_FILE_BYTES`] with a note.
    pub fn load(&self, name: &str, file: Option<&str>) -> Result<String, String> {
        let skills = self.list();
        let Some(skill) = skills.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            return Err(if names.is_empty() {
                format!("There is no skill named `{name}`, and no skills are available.")
            } else {
                format!(
                    "There is no skill named `{name}`. Available skills: {}.",
                    names.join(", ")
                )
            });
        };
        match file.map(str::trim).filter(|f| !f.is_empty()) {
            None => {
                let path = skill.dir.join(SKILL_FILE);
                let text = self
                    .cache
                    .read(&path)
                    .ok_or_else(|| format!("The skill `{name}`'s {SKILL_FILE} cannot be read."))?;
                let (_, body) = front_matter(&text)?;
                Ok(capped(body.trim(), SKILL_FILE))
            }
            Some(file) => {
                let path = confined(&skill.dir, file)
                    .map_err(|why| format!("Cannot read `{file}` of the skill `{name}`: {why}"))?;
                let bytes = std::fs::read(&path)
                    .map_err(|e| format!("Cannot read `{file}` of the skill `{name}`: {e}"))?;
                if bytes.contains(&0) {
                    return Err(format!(
                        "`{file}` of the skill `{name}` is not a text file; only text files can be read."
                    ));
                }
                Ok(capped(&String::from_utf8_lossy(&bytes), file))
            }
        }
    }
}

/// `text` cut at [`MAX_SKILL_FILE_BYTES`], with a note where it was cut.
fn capped(text: &str, what: &str) -> String {
    let kept = cut(text, MAX_SKILL_FILE_BYTES);
    if kept.len() < text.len() {
        format!(
            "{kept}\n\n[Cut here: `{what}` is {} bytes; the first {} are shown.]",
            text.len(),
            kept.len()
        )
    } else {
        kept.to_owned()
    }
}

/// `file` inside `dir`, resolved: a relative path of plain components whose
/// real location (links followed) is still inside `dir`, and a file.
fn confined(dir: &Path, file: &str) -> Result<PathBuf, String> {
    let relative = Path::new(file);
    if relative.is_absolute() || file.starts_with('/') || file.starts_with('\\') {
        return Err("absolute paths are refused; give a path inside the skill's folder".to_owned());
    }
    for part in relative.components() {
        match part {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err("`..` is refused; give a path inside the skill's folder".to_owned());
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(
                    "absolute paths are refused; give a path inside the skill's folder".to_owned(),
                );
            }
        }
    }
    let root = std::fs::canonicalize(dir).map_err(|e| format!("the skill's folder: {e}"))?;
    let real = std::fs::canonicalize(root.join(relative)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file in the skill's folder".to_owned(),
        _ => e.to_string(),
    })?;
    if !real.starts_with(&root) {
        return Err("it leads out of the skill's folder (a link); refused".to_owned());
    }
    if !real.is_file() {
        return Err("not a file".to_owned());
    }
    Ok(real)
}

/// A skill from its front matter: `name` (letters, digits, `-`, `_`; at
/// most 64) and a non-empty `description`.
fn skill_of(meta: &BTreeMap<String, String>, dir: &Path) -> Result<Skill, String> {
    let name = meta
        .get("name")
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .ok_or("its front matter has no `name`")?;
    if name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "its name `{name}` is not 1 to 64 letters, digits, `-` or `_`"
        ));
    }
    let description = meta
        .get("description")
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .ok_or("its front matter has no `description`")?;
    Ok(Skill {
        name: name.to_owned(),
        description: cut(&description, MAX_DESCRIPTION_BYTES).to_owned(),
        dir: dir.to_path_buf(),
    })
}

/// Split a `SKILL.md` into its front matter's top-level keys and its body.
/// The file must begin with a `---` line; the front matter ends at the
/// next `---` line.
pub(crate) fn front_matter(text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err("it does not begin with front matter (a `---` line)".to_owned());
    }
    let mut offset = first.len();
    let mut meta = BTreeMap::new();
    // The key whose `|` or `>` block is being read, with its lines.
    let mut block: Option<(String, bool, Vec<String>)> = None;
    let mut closed = false;
    for line in lines {
        offset += line.len();
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare.trim_end() == "---" {
            closed = true;
            break;
        }
        let indented = bare.starts_with([' ', '\t']);
        if let Some((_, _, block_lines)) = &mut block
            && (indented || bare.trim().is_empty())
        {
            block_lines.push(bare.trim().to_owned());
            continue;
        }
        if let Some((key, folded, block_lines)) = block.take() {
            meta.insert(key, join_block(&block_lines, folded));
        }
        if indented || bare.trim().is_empty() || bare.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = bare.split_once(':') else {
            continue;
        };
        let key = key.trim().to_owned();
        let value = value.trim();
        match value.chars().next() {
            Some(c @ ('|' | '>')) => block = Some((key, c == '>', Vec::new())),
            _ => {
                meta.insert(key, unquote(value));
            }
        }
    }
    if !closed {
        return Err("its front matter has no closing `---` line".to_owned());
    }
    if let Some((key, folded, block_lines)) = block {
        meta.insert(key, join_block(&block_lines, folded));
    }
    Ok((meta, &text[offset..]))
}

fn join_block(lines: &[String], folded: bool) -> String {
    let sep = if folded { " " } else { "\n" };
    lines.join(sep).trim().to_owned()
}

fn unquote(value: &str) -> String {
    let quoted = |q: char| value.len() >= 2 && value.starts_with(q) && value.ends_with(q);
    if quoted('"') {
        value[1..value.len() - 1].replace("\\\"", "\"")
    } else if quoted('\'') {
        value[1..value.len() - 1].replace("''", "'")
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_keys_quotes_and_blocks() {
        let (meta, body) = front_matter(
            "---\nname: pdf\ndescription: >\n  Fill in\n  PDF forms.\nother: 'it''s'\n---\n# Body\n",
        )
        .unwrap();
        assert_eq!(meta["name"], "pdf");
        assert_eq!(meta["description"], "Fill in PDF forms.");
        assert_eq!(meta["other"], "it's");
        assert_eq!(body, "# Body\n");
        assert!(front_matter("# no front matter\n").is_err());
        assert!(front_matter("---\nname: x\n").is_err());
    }
}
