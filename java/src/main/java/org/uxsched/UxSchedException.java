package org.uxsched;

import java.io.IOException;

/** A request the daemon refused (with its machine-readable reason), or a failure talking to it. */
public class UxSchedException extends IOException {
    private static final long serialVersionUID = 1L;

    /** The daemon's reason (docs/api.md: "rttime", "not_allowed", ...); null for I/O failures. */
    private final String reason;

    public UxSchedException(String reason, String message) {
        super(reason == null ? message : "refused (" + reason + "): " + message);
        this.reason = reason;
    }

    public String reason() {
        return reason;
    }
}
