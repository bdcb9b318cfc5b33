package io.netty.contrib.channel.rdma.internal.verbs;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A non-blocking eventfd (libc through FFM): {@link #signal()} from any thread makes it readable until
 * {@link #drain()}. Both allocate nothing.
 */
public final class EventFd implements AutoCloseable {
    private static final int EFD_CLOEXEC = 0x80000;
    private static final int EFD_NONBLOCK = 0x800;
    private static final MethodHandle EVENTFD = Epoll.libc("eventfd",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT), true);
    private static final MethodHandle READ_NO_ERRNO = Epoll.libc("read",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG), false);
    private static final MethodHandle WRITE_NO_ERRNO = Epoll.libc("write",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG), false);

    // Freed by the GC, not by close(): signal() may run on another thread while the owner shuts down.
    private final Arena arena = Arena.ofAuto();
    private final MemorySegment one = arena.allocate(JAVA_LONG);
    private final MemorySegment drained = arena.allocate(JAVA_LONG);
    private final int fd;
    private volatile boolean closed;

    public EventFd() throws IOException {
        try {
            fd = Epoll.check("eventfd", (int) EVENTFD.invokeExact(Errno.state(), 0, EFD_CLOEXEC | EFD_NONBLOCK));
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        one.set(JAVA_LONG, 0, 1L);
    }

    public int fd() {
        return fd;
    }

    /**
     * Makes the eventfd readable. Any thread. A full counter (EAGAIN) is readable already; an eventfd closed
     * meanwhile (EBADF, shutdown) has nobody left to wake.
     */
    public void signal() {
        if (closed) {
            return;
        }
        try {
            long n = (long) WRITE_NO_ERRNO.invokeExact(fd, one, 8L);
            assert n == 8 || n == -1 : n;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * Reads the counter back to 0. Nothing to read (-1 with EAGAIN) is fine, and no other error is possible on an
     * open eventfd with an 8-byte buffer.
     */
    public void drain() {
        try {
            long n = (long) READ_NO_ERRNO.invokeExact(fd, drained, 8L);
            assert n == 8 || n == -1 : n;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    @Override
    public void close() {
        closed = true;
        Epoll.closeFd(fd);
    }
}
