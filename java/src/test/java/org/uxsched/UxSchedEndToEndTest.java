package org.uxsched;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * The Java client end to end against a real uxsched daemon on a private socket, as root (the
 * daemon changes scheduling settings): every request kind granted, seen in the kernel, and
 * restored when its grant closes. Run by {@code make test} (scripts/test.sh).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class UxSchedEndToEndTest {
    private static Path dir;
    private static Path socket;
    private static Process daemon;
    /** This test thread's nice before any grant (what every restore must give back). */
    private static int base;

    @BeforeAll
    static void startDaemon() throws Exception {
        String uid = new String(new ProcessBuilder("id", "-u").start().getInputStream()
                .readAllBytes()).trim();
        assertEquals("0", uid, "these tests start a uxsched daemon, which needs root: run"
                + " `sudo make test` (as CI does)");
        String bin = System.getProperty("uxsched.bin");
        assertTrue(bin != null && Files.isExecutable(Path.of(bin)), "no uxsched binary at "
                + bin + ": build it (`cargo build --release -p uxsched`) or pass -Duxsched.bin=");
        dir = Files.createTempDirectory("uxsched-java-");
        socket = dir.resolve("uxsched.sock");
        Path config = dir.resolve("uxsched.toml");
        Files.writeString(config, String.join("\n",
                "mode = \"eimos\"",
                "socket = \"" + socket + "\"",
                "journal = \"" + dir.resolve("journal.sqlite") + "\"",
                "cgroup_name = \"uxsched-java-" + ProcessHandle.current().pid() + "\"",
                "rescan_ms = 50",
                "min_focus_interval_ms = 0",
                "min_nice = -12",
                "[tracker]",
                "store = \"" + dir.resolve("tracker.sqlite") + "\"",
                ""));
        // This test thread (JUnit runs every test on it) and the daemon it starts as ordinary
        // SCHED_OTHER nice 0 threads: make test may run under `nice -n 19 chrt -i 0`, and
        // uxsched changes only fair-class threads.
        String tid = Integer.toString(UxSched.currentTid());
        for (String[] cmd : new String[][] {{"chrt", "-o", "-p", "0", tid},
                {"renice", "-n", "0", "-p", tid}}) {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            assertEquals(0, p.waitFor(), String.join(" ", cmd) + ": " + out);
        }
        base = myNice();
        assertEquals(0, base);
        daemon = new ProcessBuilder(bin, "daemon", "--config", config.toString())
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("daemon.log").toFile())
                .start();
        waitUntil("the daemon answers on " + socket, 20_000, () -> {
            try {
                UxSched.connect(socket).close();
                return true;
            } catch (UxSchedException e) {
                return false;
            }
        });
    }

    @AfterAll
    static void stopDaemon() throws Exception {
        if (daemon != null) {
            daemon.destroy(); // SIGTERM: it restores everything
            if (!daemon.waitFor(10, TimeUnit.SECONDS)) {
                daemon.destroyForcibly().waitFor();
                fail("the daemon did not stop within 10 s of SIGTERM; log: " + log());
            }
        }
        // Stopped cleanly: its scratch directory goes (a failure above keeps it, log included).
        if (dir != null) {
            try (var paths = Files.walk(dir)) {
                paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    static String log() {
        try {
            return Files.readString(dir.resolve("daemon.log"));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    static void waitUntil(String what, long ms, BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + ms * 1_000_000;
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                fail("timed out waiting for: " + what);
            }
            Thread.sleep(20);
        }
    }

    /** Field {@code n} (1-based) of /proc/PID/task/TID/stat, after the comm. */
    static long statField(long pid, int tid, int n) {
        try {
            String s = Files.readString(Path.of("/proc/" + pid + "/task/" + tid + "/stat"));
            String[] rest = s.substring(s.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(rest[n - 3]);
        } catch (IOException e) {
            throw new AssertionError("cannot read the stat of " + pid + "/" + tid, e);
        }
    }

    static int niceOf(long pid, int tid) {
        return (int) statField(pid, tid, 19);
    }

    static int myNice() throws UxSchedException {
        return niceOf(ProcessHandle.current().pid(), UxSched.currentTid());
    }

    /** Scheduling policy of the thread (field 41: 0 other, 1 fifo, 2 rr). */
    static int myPolicy() throws UxSchedException {
        return (int) statField(ProcessHandle.current().pid(), UxSched.currentTid(), 41);
    }

    @Test
    @Order(1)
    void highPriorityAndLatencyAreGrantedAndRestoredOnClose() throws Exception {
        try (UxSched ux = UxSched.connect(socket)) {
            int before = myNice();
            try (Grant g = ux.requestHighPriority(-5)) {
                assertEquals(Integer.valueOf(-5), g.reply().nice(), g.reply().toString());
                assertEquals("other", g.reply().policy());
                assertEquals(UxSched.currentTid(), g.reply().tid());
                assertEquals(-5, myNice());
            }
            assertEquals(before, myNice(), "restored when the grant closed");
            try (Grant g = ux.requestLatency(500)) {
                assertEquals(Long.valueOf(500), g.reply().sliceUs());
            }
            ux.requestHighPriority(-3);
            ux.reset();
            assertEquals(before, myNice(), "reset");
            // A grant lasts as long as its connection.
            ux.requestHighPriority(-4);
            assertEquals(-4, myNice());
        }
        waitUntil("restored after the connection closed", 5_000, () -> {
            try {
                return myNice() == base;
            } catch (UxSchedException e) {
                return false;
            }
        });
    }

    @Test
    @Order(2)
    void realtimeIsRefusedWithoutRlimitRttime() throws Exception {
        List<String> limits = Files.readAllLines(Path.of("/proc/self/limits"));
        assertTrue(limits.stream().anyMatch(l -> l.startsWith("Max realtime timeout")
                && l.contains("unlimited")), "this JVM's RLIMIT_RTTIME must start unlimited: "
                + limits);
        try (UxSched ux = UxSched.connect(socket)) {
            UxSchedException e = assertThrows(UxSchedException.class,
                    () -> ux.requestRealtime(5));
            assertEquals("rttime", e.reason(), e.getMessage());
            assertTrue(e.getMessage().contains("RLIMIT_RTTIME"), e.getMessage());
            assertEquals(0, myPolicy(), "still SCHED_OTHER");
        }
    }

    @Test
    @Order(3)
    void realtimeIsGrantedWithRlimitRttimeAndRestored() throws Exception {
        UxSched.limitRtTime(200_000); // from here on this JVM's hard limit is 200 ms
        try (UxSched ux = UxSched.connect(socket)) {
            try (Grant g = ux.requestRealtime(3)) {
                assertEquals("fifo", g.reply().policy(), g.reply().toString());
                assertEquals(Integer.valueOf(3), g.reply().priority());
                assertEquals(1, myPolicy());
            } catch (UxSchedException e) {
                fail("RT not granted: " + e.getMessage() + " (a cpu cgroup without RT runtime,"
                        + " cpu.rt_runtime_us = 0, refuses FIFO threads: run the tests outside"
                        + " it); the JVM's cgroups: " + Files.readString(Path.of(
                        "/proc/self/cgroup")));
            }
            assertEquals(0, myPolicy(), "back to SCHED_OTHER");
        }
    }

    @Test
    @Order(4)
    void aDependencyIsRaisedWithTheThreadAndReleased() throws Exception {
        Process sleeper = new ProcessBuilder("sleep", "60").start();
        try (UxSched ux = UxSched.connect(socket)) {
            int pid = (int) sleeper.pid();
            try (Grant g = ux.requestHighPriority(-6); Grant d = ux.dependOn(pid)) {
                assertEquals(Integer.valueOf(-6), g.reply().nice());
                assertArrayEquals(new int[] {pid}, d.reply().raised(), d.reply().toString());
                assertEquals(-6, niceOf(pid, pid));
            }
            assertEquals(base, niceOf(pid, pid), "lowered when the dependency closed");
            UxSchedException e = assertThrows(UxSchedException.class,
                    () -> ux.dependOn(Integer.MAX_VALUE - 1));
            assertEquals("identity", e.reason(), e.getMessage());
        } finally {
            sleeper.destroyForcibly().waitFor();
        }
    }

    @Test
    @Order(5)
    void anInteractionBoostsLikeTheUiThreadUntilItEnds() throws Exception {
        try (UxSched ux = UxSched.connect(socket)) {
            try (Grant g = ux.interactionStart()) {
                assertEquals(Integer.valueOf(-12), g.reply().nice(), g.reply().toString());
                assertEquals(-12, myNice());
            }
            assertEquals(base, myNice());
            ux.interactionStart();
            ux.interactionEnd();
            assertEquals(base, myNice());
        }
    }

    @Test
    @Order(6)
    void aHintSessionRaisesTheBoostOverTargetAndDropsItWhenReportsStop() throws Exception {
        long target = 50_000_000L; // stale after 0.5 s without a report
        try (UxSched ux = UxSched.connect(socket)) {
            int me = UxSched.currentTid();
            try (HintSession s = ux.createHintSession(new int[] {me}, target)) {
                assertArrayEquals(new int[] {me}, s.tids());
                boolean uclamp = Files.exists(Path.of("/proc/sys/kernel/sched_util_clamp_min"));
                assertEquals(!uclamp, s.uclamp() != null, "says why not: " + s.uclamp());
                assertEquals(uclamp, s.uclampMin() >= 0, "uclamp.min " + s.uclampMin());
                int last = 0;
                for (int i = 0; i < 5; i++) {
                    s.reportActual(2 * target);
                    assertTrue(s.nice() <= last, "rises: " + s.nice() + " after " + last);
                    last = s.nice();
                    assertEquals(last, myNice(), "the kernel holds the session's nice");
                }
                assertTrue(last <= -5, "after 5 reports at 2x: " + last);
                s.reportActual(target / 2);
                assertTrue(s.nice() > last, "falls under target: " + s.nice());
                waitUntil("the stale session's boost dropped", 3_000, () -> {
                    try {
                        return myNice() == base;
                    } catch (UxSchedException e) {
                        return false;
                    }
                });
                s.reportActual(2 * target);
                s.reportActual(2 * target);
                assertTrue(myNice() < 0, "revived by reports");
                s.updateTarget(4 * target);
            }
            assertEquals(base, myNice(), "closed: restored");
        }
    }
}
