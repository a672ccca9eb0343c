package org.uxsched;

import com.google.gson.JsonObject;

/**
 * A performance-hint session (Android's ADPF model): report each unit of work's duration and the
 * daemon raises or lowers the session threads' boost towards the target (docs/api.md). Closing it
 * ends the boost.
 */
public final class HintSession implements AutoCloseable {
    private final UxSched ux;
    private final long id;
    private JsonObject state;
    private boolean closed;

    HintSession(UxSched ux, JsonObject state) {
        this.ux = ux;
        this.id = state.get("id").getAsLong();
        this.state = state;
    }

    public long id() {
        return id;
    }

    /** The nice level the session's threads have now (0: no boost). */
    public int nice() {
        return state.get("nice").getAsInt();
    }

    /** The threads of the session. */
    public int[] tids() {
        return Reply.ints(state.getAsJsonArray("tids"));
    }

    /**
     * The uclamp.min (0..=1024) the session gives its threads now, or -1 where the kernel has no
     * utilisation clamping (then {@link #uclamp()} says why).
     */
    public int uclampMin() {
        return state.has("uclamp_min") ? state.get("uclamp_min").getAsInt() : -1;
    }

    /** Why there is no uclamp.min on this machine (null where it is given). */
    public String uclamp() {
        return state.has("uclamp") ? state.get("uclamp").getAsString() : null;
    }

    /** ADPF's reportActualWorkDuration: the last unit of work took {@code actualNs}. */
    public void reportActual(long actualNs) throws UxSchedException {
        state = ux.hint("hint_report", "\"session\":" + id + ",\"actual_ns\":" + actualNs);
    }

    /** ADPF's updateTargetWorkDuration. */
    public void updateTarget(long targetNs) throws UxSchedException {
        state = ux.hint("hint_target", "\"session\":" + id + ",\"target_ns\":" + targetNs);
    }

    @Override
    public void close() throws UxSchedException {
        if (!closed) {
            closed = true;
            ux.call(UxSched.currentTid(), "hint_close", "\"session\":" + id);
        }
    }
}
