//! The D-Bus interfaces of other foreground managers that uxsched serves, so their clients work
//! unchanged: Feral GameMode's and system76-scheduler's (issue 32).
