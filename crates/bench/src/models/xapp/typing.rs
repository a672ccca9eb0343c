//! Typing a command line as a user does, key by key through XTEST: each character is the key
//! that produces it on the server's keyboard map, with Shift held for the shifted ones (`&`
//! on a US map). The `launch` scenario types `mousepad launch.txt &` into a terminal this way,
//! so the terminal, its shell and the program see exactly what a person's keystrokes give them.

use anyhow::{Context, Result};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{Window, KEY_PRESS_EVENT, KEY_RELEASE_EVENT};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

const SHIFT_L: u32 = 0xffe1;
/// The Return key's keysym.
pub const RETURN: u32 = 0xff0d;

/// A key to press: its keycode, and whether Shift must be held.
#[derive(Debug, Clone, Copy)]
struct Key {
    code: u8,
    shift: bool,
}

/// The keys of one text, resolved once against the server's keyboard map.
pub struct Typist {
    root: Window,
    shift: u8,
    text: Vec<Key>,
    enter: Key,
}

impl Typist {
    /// Resolve every character of `text` (printable ASCII: its keysym is its code point) and
    /// Return; an error names a character this keyboard map cannot type.
    pub fn new(conn: &RustConnection, root: Window, text: &str) -> Result<Typist> {
        let map = super::input::KeyMap::read(conn)?;
        let find = |sym: u32| -> Option<Key> {
            [(0, false), (1, true)]
                .into_iter()
                .find_map(|(column, shift)| {
                    Some(Key {
                        code: map.code(sym, column)?,
                        shift,
                    })
                })
        };
        let shift = find(SHIFT_L)
            .context("no Shift_L key on this server's keyboard map")?
            .code;
        let text = text
            .chars()
            .map(|c| {
                find(u32::from(c))
                    .with_context(|| format!("no key types {c:?} on this server's keyboard map"))
            })
            .collect::<Result<_>>()?;
        let enter = find(RETURN).context("no Return key on this server's keyboard map")?;
        Ok(Typist {
            root,
            shift,
            text,
            enter,
        })
    }

    /// Type the whole text, one press and release per character, in one flush.
    pub fn type_text(&self, conn: &RustConnection) -> Result<()> {
        for &key in &self.text {
            self.send(conn, key)?;
        }
        conn.flush()?;
        Ok(())
    }

    /// Press and release Return, flushed.
    pub fn press_enter(&self, conn: &RustConnection) -> Result<()> {
        self.send(conn, self.enter)?;
        conn.flush()?;
        Ok(())
    }

    fn send(&self, conn: &RustConnection, key: Key) -> Result<()> {
        let fake = |kind: u8, code: u8| conn.xtest_fake_input(kind, code, 0, self.root, 0, 0, 0);
        if key.shift {
            fake(KEY_PRESS_EVENT, self.shift)?;
        }
        fake(KEY_PRESS_EVENT, key.code)?;
        fake(KEY_RELEASE_EVENT, key.code)?;
        if key.shift {
            fake(KEY_RELEASE_EVENT, self.shift)?;
        }
        Ok(())
    }
}
