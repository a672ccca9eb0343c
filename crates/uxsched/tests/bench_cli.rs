//! `uxsched bench` rejects malformed options with exit code 2 and names the valid choices.

use std::process::Command;

fn uxsched(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_mode_lists_the_valid_ones() {
    let (code, err) = uxsched(&["bench", "painting", "--modes", "stock,turbo"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("turbo") && err.contains("idle, stock, android, s76, fifo"),
        "{err}"
    );
}

#[test]
fn unknown_scenario_lists_the_valid_ones() {
    let (code, err) = uxsched(&["bench", "scrolling"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("painting, worker, frames, alarm, player, reader, gallery"),
        "{err}"
    );
}

#[test]
fn bad_duration_and_reps_are_input_errors() {
    for args in [
        &["bench", "alarm", "--duration", "5 parsecs"][..],
        &["bench", "alarm", "--duration", "0s"],
        &["bench", "alarm", "--reps", "0"],
        &["bench", "alarm", "--load", "gpu"],
        &["demo", "--reps", "many"],
    ] {
        let (code, err) = uxsched(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("error:"), "{args:?}: {err}");
    }
}

#[test]
fn list_names_scenarios_and_modes() {
    let out = Command::new(env!("CARGO_BIN_EXE_uxsched"))
        .args(["bench", "list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in ["painting", "gallery", "android", "s76", "fifo", "uxsched"] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
}
