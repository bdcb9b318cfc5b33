package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/** The few libc calls the event fds need: {@code fcntl} (non-blocking mode) and {@code poll} (bounded waits). */
final class Libc {
    private static final int F_GETFL = 3;
    private static final int F_SETFL = 4;
    private static final int O_NONBLOCK = 0x800;
    private static final short POLLIN = 1;

    private static final MethodHandle FCNTL = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("fcntl").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT),
            Linker.Option.firstVariadicArg(2), CAPTURE);
    private static final MethodHandle POLL = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("poll").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), CAPTURE);
    private static final MethodHandle POLL_NO_ERRNO = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("poll").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));

    private Libc() {
    }

    /** Sets or clears {@code O_NONBLOCK} on {@code fd}. */
    static void setNonBlocking(int fd, boolean nonBlocking) {
        try {
            MemorySegment state = Errno.state();
            int flags = (int) FCNTL.invokeExact(state, fd, F_GETFL, 0);
            LibIbverbs.check("fcntl(F_GETFL)", flags < 0 ? -1 : 0);
            int updated = nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
            LibIbverbs.check("fcntl(F_SETFL)", (int) FCNTL.invokeExact(state, fd, F_SETFL, updated));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** A {@code struct pollfd} for {@link #pollNow} that asks whether {@code fd} is readable. */
    static MemorySegment pollFd(Arena arena, int fd) {
        MemorySegment pollfd = arena.allocate(8, 4);
        pollfd.set(JAVA_INT, 0, fd);
        pollfd.set(JAVA_SHORT, 4, POLLIN);
        return pollfd;
    }

    /**
     * {@code poll} without waiting and without errno capture (allocation-free): {@code > 0} if the fd is readable
     * or in error ({@code revents} is not looked at), 0 if not, {@code < 0} if poll failed (errno unknown).
     */
    static int pollNow(MemorySegment pollfd) {
        try {
            return (int) POLL_NO_ERRNO.invokeExact(pollfd, 1L, 0);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** Waits up to {@code timeoutMillis} (-1: forever) for {@code fd} to become readable. */
    static boolean awaitReadable(int fd, int timeoutMillis) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pollfd = arena.allocate(8, 4);
            pollfd.set(JAVA_INT, 0, fd);
            pollfd.set(JAVA_SHORT, 4, POLLIN);
            while (true) {
                int rc = (int) POLL.invokeExact(Errno.state(), pollfd, 1L, timeoutMillis);
                if (rc >= 0) {
                    return rc > 0;
                }
                if (Errno.last() != Errno.EINTR) {
                    LibIbverbs.check("poll", rc);
                }
            }
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
