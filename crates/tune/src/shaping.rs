//! The one thing the tune run needs from whoever shapes: change, remove, put back. The CLI
//! implements it with unbloat's transactions; the run and the Ctrl-C watcher share it.

use unbloat_shaper::options::ShapeOptions;

/// Changes the interface's shaping for the run. Every method is one verified transaction.
pub trait Shaping {
    /// Shapes with `opts` (the tune's rates and link options); in place when only rates change.
    fn shape(&mut self, opts: &ShapeOptions) -> Result<(), String>;
    /// Removes the shaping (the link runs as the modem leaves it).
    fn unshape(&mut self) -> Result<(), String>;
    /// Puts back what was there before the run; says what it did.
    fn restore(&mut self) -> Result<String, String>;
}
