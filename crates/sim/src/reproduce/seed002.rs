use super::{Ctx, Outcome};
pub fn run(_c: &Ctx) -> Result<Outcome, String> {
    Ok(Outcome::default())
}
