package org.uxsched;

/**
 * What one request gave one thread; closing it undoes that request (a {@code reset} of the
 * thread, an {@code undepend}, an {@code interaction_end}). Use with try-with-resources.
 */
public final class Grant implements AutoCloseable {
    /** How this grant is undone. */
    interface Undo {
        void run() throws UxSchedException;
    }

    private final Reply reply;
    private final Undo undo;
    private boolean closed;

    Grant(Reply reply, Undo undo) {
        this.reply = reply;
        this.undo = undo;
    }

    /** The daemon's reply: what the kernel holds for the thread after the request. */
    public Reply reply() {
        return reply;
    }

    @Override
    public void close() throws UxSchedException {
        if (!closed) {
            closed = true;
            undo.run();
        }
    }
}
