//! Writing to standard output. A reader that closes the pipe early (`fresco query ... | head`)
//! is not an error: fresco stops quietly, as a Unix tool does, instead of panicking the way
//! `println!` does on a broken pipe.

use std::fmt;
use std::io::{self, Write};

/// `println!` for standard output that ends the process quietly when the reader has gone.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` for standard output that ends the process quietly when the reader has gone.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!($($arg)*)) };
}

pub(crate) use {out, outln};

pub(crate) fn write_stdout(args: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            // Everything that matters is done by the time fresco prints: the index is committed
            // before a summary or an answer is written.
            std::process::exit(0);
        }
        eprintln!("fresco: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}
