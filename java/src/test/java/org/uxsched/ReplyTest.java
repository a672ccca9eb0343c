package org.uxsched;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonParser;
import org.junit.jupiter.api.Test;

/** The client's reading of protocol v1 replies (docs/api.md), without a daemon. */
class ReplyTest {
    private static Reply parse(String line) {
        return new Reply(JsonParser.parseString(line).getAsJsonObject());
    }

    @Test
    void grantedFairAndRtThreadsAndDependencies() {
        Reply r = parse("{\"v\":1,\"ok\":true,\"granted\":{\"tid\":42,\"policy\":\"other\","
                + "\"nice\":-5,\"slice_us\":3000,\"reset_on_fork\":true,\"until\":\"close\"},"
                + "\"raised\":[7,8]}");
        assertTrue(r.ok());
        assertEquals(42, r.tid());
        assertEquals("other", r.policy());
        assertEquals(Integer.valueOf(-5), r.nice());
        assertNull(r.priority());
        assertArrayEquals(new int[] {7, 8}, r.raised());
        Reply rt = parse("{\"v\":1,\"ok\":true,\"granted\":{\"tid\":1,\"policy\":\"fifo\","
                + "\"priority\":10,\"reset_on_fork\":true,\"until\":\"exit\"}}");
        assertEquals(Integer.valueOf(10), rt.priority());
        assertArrayEquals(new int[0], rt.raised());
    }

    @Test
    void refusalsCarryTheirReason() {
        UxSchedException e = new UxSchedException("rttime", "set RLIMIT_RTTIME");
        assertEquals("rttime", e.reason());
        assertTrue(e.getMessage().contains("refused (rttime)"));
        assertTrue(!parse("{\"v\":1,\"ok\":false,\"refused\":\"rttime\",\"error\":\"x\"}").ok());
    }

    @Test
    void theThreadIdIsTheKernels() throws Exception {
        int tid = UxSched.currentTid();
        assertTrue(java.nio.file.Files.exists(java.nio.file.Path.of(
                "/proc/" + ProcessHandle.current().pid() + "/task/" + tid)));
    }
}
