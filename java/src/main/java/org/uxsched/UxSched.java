package org.uxsched;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonSyntaxException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * uxsched's real-time API for Java (docs/api.md, protocol v1) — the modern form of seed 002's
 * Java API, without JNI: one Unix-domain-socket connection to the daemon (java.nio, Java 16+),
 * thread ids from {@code /proc/thread-self}. Requests are for the calling (platform) thread; what
 * they give lasts until the returned {@link Grant} is closed, the thread exits or this connection
 * closes.
 *
 * <pre>{@code
 * try (UxSched ux = UxSched.connect();
 *      Grant g = ux.requestHighPriority(-5);
 *      Grant d = ux.dependOn(mediaServerPid)) {
 *     // time-critical work
 * }
 * }</pre>
 */
public final class UxSched implements AutoCloseable {
    /** Where the daemon listens unless its config says otherwise. */
    public static final String DEFAULT_SOCKET = "/run/uxsched/uxsched.sock";
    /** Longest reply line read (the daemon's are far shorter). */
    private static final int MAX_REPLY = 1 << 16;

    private final SocketChannel channel;
    private final BufferedReader in;
    private final OutputStream out;

    private UxSched(SocketChannel channel) {
        this.channel = channel;
        this.in = new BufferedReader(
                new InputStreamReader(Channels.newInputStream(channel), StandardCharsets.UTF_8));
        this.out = Channels.newOutputStream(channel);
    }

    /** Connect to {@code $UXSCHED_SOCKET}, or {@link #DEFAULT_SOCKET}. */
    public static UxSched connect() throws UxSchedException {
        String env = System.getenv("UXSCHED_SOCKET");
        return connect(Path.of(env != null ? env : DEFAULT_SOCKET));
    }

    public static UxSched connect(Path socket) throws UxSchedException {
        try {
            SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                ch.connect(UnixDomainSocketAddress.of(socket));
            } catch (IOException e) {
                ch.close();
                throw e;
            }
            return new UxSched(ch);
        } catch (IOException e) {
            throw new UxSchedException(null, "cannot connect to the daemon at " + socket + ": "
                    + e.getMessage() + " (is `uxsched daemon` running?)");
        }
    }

    /** The calling thread's kernel id: {@code /proc/thread-self} links to {@code PID/task/TID}. */
    public static int currentTid() throws UxSchedException {
        try {
            Path link = Files.readSymbolicLink(Path.of("/proc/thread-self"));
            return Integer.parseInt(link.getFileName().toString());
        } catch (IOException | NumberFormatException e) {
            throw new UxSchedException(null, "cannot read /proc/thread-self (" + e
                    + "): is /proc mounted? (Linux >= 3.17)");
        }
    }

    /**
     * Set this JVM's soft and hard RLIMIT_RTTIME to {@code us} µs with util-linux's prlimit(1)
     * (no JNI): real time is granted only to processes the kernel stops if a thread runs that
     * long without blocking. Alternatively start the JVM under {@code prlimit --rttime=U:U}.
     */
    public static void limitRtTime(long us) throws UxSchedException {
        long pid = ProcessHandle.current().pid();
        ProcessBuilder pb = new ProcessBuilder(
                "prlimit", "--rttime=" + us + ":" + us, "--pid", Long.toString(pid));
        pb.redirectErrorStream(true);
        try {
            Process p = pb.start();
            String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new UxSchedException(null, "prlimit --rttime failed: " + said.trim()
                        + " (a lowered hard limit cannot be raised again without"
                        + " CAP_SYS_RESOURCE)");
            }
        } catch (IOException e) {
            throw new UxSchedException(null, "cannot run prlimit (util-linux): " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UxSchedException(null, "interrupted while setting RLIMIT_RTTIME");
        }
    }

    /** SCHED_FIFO at {@code priority} for the calling thread (needs {@link #limitRtTime}). */
    public Grant requestRealtime(int priority) throws UxSchedException {
        return requestRealtime("fifo", priority);
    }

    /** SCHED_FIFO ("fifo") or SCHED_RR ("rr") at {@code priority} for the calling thread. */
    public Grant requestRealtime(String policy, int priority) throws UxSchedException {
        if (!policy.equals("fifo") && !policy.equals("rr")) {
            throw new UxSchedException("bad_request", "policy must be \"fifo\" or \"rr\"");
        }
        return resettable("realtime", "\"policy\":\"" + policy + "\",\"priority\":" + priority);
    }

    /** The fair class at nice level {@code nice} for the calling thread. */
    public Grant requestHighPriority(int nice) throws UxSchedException {
        return resettable("high_priority", "\"nice\":" + nice);
    }

    /** A custom EEVDF slice (latency hint) of {@code sliceUs} µs for the calling thread. */
    public Grant requestLatency(long sliceUs) throws UxSchedException {
        return resettable("latency", "\"slice_us\":" + sliceUs);
    }

    /**
     * The calling thread depends on process (or thread) {@code pid}: it is raised with this
     * thread while this thread is raised (seed 002). Closing the grant ends the dependency.
     */
    public Grant dependOn(int pid) throws UxSchedException {
        int tid = currentTid();
        Reply r = call(tid, "depend", "\"on\":" + pid);
        return new Grant(r, () -> call(tid, "undepend", "\"on\":" + pid));
    }

    /** The calling thread handles user input now (bounded by the daemon's interaction_max_ms). */
    public Grant interactionStart() throws UxSchedException {
        int tid = currentTid();
        Reply r = call(tid, "interaction_start", null);
        return new Grant(r, () -> call(tid, "interaction_end", null));
    }

    /** The calling thread is done with the input. */
    public void interactionEnd() throws UxSchedException {
        call(currentTid(), "interaction_end", null);
    }

    /**
     * A performance-hint session for {@code tids} (threads of this process; the first creates
     * it), aiming at {@code targetNs} per unit of work.
     */
    public HintSession createHintSession(int[] tids, long targetNs) throws UxSchedException {
        if (tids.length == 0) {
            throw new UxSchedException("bad_request", "a hint session needs at least one thread");
        }
        Reply r = call(tids[0], "hint_create", "\"target_ns\":" + targetNs);
        HintSession s = new HintSession(this, r.session());
        for (int i = 1; i < tids.length; i++) {
            call(tids[i], "hint_thread", "\"session\":" + s.id());
        }
        return s;
    }

    /** Back to the calling thread's own settings (its dependencies and interaction end too). */
    public void reset() throws UxSchedException {
        call(currentTid(), "reset", null);
    }

    /** Closing the connection ends every grant asked on it. */
    @Override
    public void close() throws UxSchedException {
        try {
            channel.close();
        } catch (IOException e) {
            throw new UxSchedException(null, "closing the connection: " + e.getMessage());
        }
    }

    private Grant resettable(String cmd, String fields) throws UxSchedException {
        int tid = currentTid();
        Reply r = call(tid, cmd, fields);
        return new Grant(r, () -> call(tid, "reset", null));
    }

    JsonObject hint(String cmd, String fields) throws UxSchedException {
        return call(currentTid(), cmd, fields).session();
    }

    /** Send one request line for {@code tid}; the reply, or the refusal as an exception. */
    synchronized Reply call(int tid, String cmd, String fields) throws UxSchedException {
        String line = "{\"v\":1,\"cmd\":\"" + cmd + "\",\"tid\":" + tid
                + (fields == null ? "" : "," + fields) + "}\n";
        String reply;
        try {
            out.write(line.getBytes(StandardCharsets.UTF_8));
            out.flush();
            reply = in.readLine();
        } catch (IOException e) {
            throw new UxSchedException(null, "talking to the daemon: " + e.getMessage());
        }
        if (reply == null) {
            throw new UxSchedException(null, "the daemon closed the connection without answering");
        }
        if (reply.length() > MAX_REPLY) {
            throw new UxSchedException(null, "the daemon's reply is longer than " + MAX_REPLY);
        }
        JsonObject json;
        try {
            json = JsonParser.parseString(reply).getAsJsonObject();
        } catch (JsonSyntaxException | IllegalStateException e) {
            throw new UxSchedException(null, "the daemon's reply is not valid: " + reply);
        }
        Reply r = new Reply(json);
        if (!r.ok()) {
            String reason = json.has("refused") ? json.get("refused").getAsString() : "bad_request";
            String msg = json.has("error") ? json.get("error").getAsString() : "";
            throw new UxSchedException(reason, msg);
        }
        return r;
    }
}
