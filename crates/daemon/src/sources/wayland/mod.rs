//! The Wayland compositors' focus sources: each asks its compositor's own IPC which window is
//! focused and names that window's process, for the user who runs the compositor (issue 32).
