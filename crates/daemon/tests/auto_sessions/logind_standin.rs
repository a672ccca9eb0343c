//! A stand-in logind on a private bus: the sessions a test gives it (no logind runs here).

use zbus::zvariant::OwnedObjectPath;

#[derive(Clone)]
pub struct Session {
    pub id: String,
    pub uid: u32,
    pub kind: &'static str,
    pub display: String,
    pub active: bool,
    pub remote: bool,
}

impl Session {
    fn path(&self) -> OwnedObjectPath {
        OwnedObjectPath::try_from(format!("/org/freedesktop/login1/session/_3{}", self.id)).unwrap()
    }
}

struct Manager(Vec<Session>);

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    fn list_sessions(&self) -> Vec<(String, u32, String, String, OwnedObjectPath)> {
        self.0
            .iter()
            .map(|s| (s.id.clone(), s.uid, "user".into(), "seat0".into(), s.path()))
            .collect()
    }
}

struct SessionObject(Session);

#[zbus::interface(name = "org.freedesktop.login1.Session")]
impl SessionObject {
    #[zbus(property, name = "Type")]
    fn kind(&self) -> String {
        self.0.kind.into()
    }
    #[zbus(property)]
    fn class(&self) -> String {
        "user".into()
    }
    #[zbus(property)]
    fn display(&self) -> String {
        self.0.display.clone()
    }
    #[zbus(property)]
    fn leader(&self) -> u32 {
        1
    }
    #[zbus(property)]
    fn active(&self) -> bool {
        self.0.active
    }
    #[zbus(property)]
    fn remote(&self) -> bool {
        self.0.remote
    }
    #[zbus(property)]
    fn state(&self) -> String {
        "active".into()
    }
    #[zbus(property)]
    fn desktop(&self) -> String {
        "xfce".into()
    }
}

/// Serve `sessions` as `org.freedesktop.login1` on the bus at `address`.
pub fn serve(address: &str, sessions: Vec<Session>) -> zbus::blocking::Connection {
    let mut b = zbus::blocking::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.login1")
        .unwrap()
        .serve_at("/org/freedesktop/login1", Manager(sessions.clone()))
        .unwrap();
    for s in sessions {
        b = b.serve_at(s.path(), SessionObject(s)).unwrap();
    }
    b.build().unwrap()
}
