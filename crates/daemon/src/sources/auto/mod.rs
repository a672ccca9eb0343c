//! `sources = ["auto"]`: the graphical sessions of the machine, found by the daemon itself, each
//! followed by the source that fits its desktop (issue 32).
