//! Schema shaping bench (filled in with the schema module).
fn main() {}
