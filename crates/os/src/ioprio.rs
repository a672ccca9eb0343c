//! I/O priority of one thread through `ioprio_get(2)` / `ioprio_set(2)` (not wrapped by libc).
//! Honoured by the bfq and mq-deadline schedulers; `none` ignores it.

use std::io;

const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_SHIFT: u32 = 13;

pub const CLASS_RT: u16 = 1;
pub const CLASS_BE: u16 = 2;
pub const CLASS_IDLE: u16 = 3;

/// An I/O priority value as the kernel encodes it: class << 13 | level.
pub fn encode(class: u16, level: u16) -> u16 {
    (class << IOPRIO_CLASS_SHIFT) | (level & 7)
}

/// (class, level) of an encoded value.
pub fn decode(v: u16) -> (u16, u16) {
    (v >> IOPRIO_CLASS_SHIFT, v & 7)
}

/// Read a thread's I/O priority.
pub fn get(tid: i32) -> io::Result<u16> {
    // SAFETY: plain integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u16)
}

/// Set a thread's I/O priority.
pub fn set(tid: i32, value: u16) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid,
            value as libc::c_int,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_the_kernels() {
        assert_eq!(encode(CLASS_BE, 7), 0x4007);
        assert_eq!(encode(CLASS_RT, 4), 0x2004);
        assert_eq!(decode(0x6000), (CLASS_IDLE, 0));
        assert!(get(0).is_ok());
    }
}
