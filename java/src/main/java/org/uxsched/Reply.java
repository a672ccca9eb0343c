package org.uxsched;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

/** One reply of protocol v1 (docs/api.md), read from the daemon's JSON line. */
public final class Reply {
    private final JsonObject json;

    Reply(JsonObject json) {
        this.json = json;
    }

    public boolean ok() {
        return json.has("ok") && json.get("ok").getAsBoolean();
    }

    /** What the thread has now: "fifo", "rr", "other", ... */
    public String policy() {
        return granted("policy") == null ? null : granted("policy").getAsString();
    }

    /** The RT priority (RT threads), else null. */
    public Integer priority() {
        JsonElement e = granted("priority");
        return e == null ? null : e.getAsInt();
    }

    /** The nice level (fair threads), else null. */
    public Integer nice() {
        JsonElement e = granted("nice");
        return e == null ? null : e.getAsInt();
    }

    /** The slice in µs (fair threads), else null. */
    public Long sliceUs() {
        JsonElement e = granted("slice_us");
        return e == null ? null : e.getAsLong();
    }

    public int tid() {
        return granted("tid").getAsInt();
    }

    /** {@code depend}: the dependency's threads raised now. */
    public int[] raised() {
        return ints(json.getAsJsonArray("raised"));
    }

    /** Hint requests: the session, as the daemon holds it after the request. */
    public JsonObject session() {
        return json.has("session") ? json.getAsJsonObject("session") : null;
    }

    public JsonObject json() {
        return json;
    }

    private JsonElement granted(String key) {
        JsonObject g = json.has("granted") ? json.getAsJsonObject("granted") : null;
        return g == null || !g.has(key) ? null : g.get(key);
    }

    static int[] ints(JsonArray a) {
        if (a == null) {
            return new int[0];
        }
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).getAsInt();
        }
        return out;
    }

    @Override
    public String toString() {
        return json.toString();
    }
}
