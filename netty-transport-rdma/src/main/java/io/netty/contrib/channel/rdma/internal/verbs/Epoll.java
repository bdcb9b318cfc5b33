package io.netty.contrib.channel.rdma.internal.verbs;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An epoll instance (libc through FFM): watched fds with a 64-bit token each (level-triggered unless the interest
 * has {@code EPOLLET}), and a wait that allocates nothing unless it fails. Waits are confined to one thread (the
 * event loop's); {@link #add}, {@link #modify} and {@link #remove} may be called from any thread (Netty's epoll
 * channels change their interest from other threads too).
 */
public final class Epoll implements AutoCloseable {
    public static final int EPOLLIN = 0x001;
    public static final int EPOLLOUT = 0x004;
    private static final int EPOLL_CTL_ADD = 1;
    private static final int EPOLL_CTL_DEL = 2;
    private static final int EPOLL_CTL_MOD = 3;
    private static final int EPOLL_CLOEXEC = 0x80000;

    // struct epoll_event is packed on x86_64: u32 events; u64 data.
    private static final StructLayout EPOLL_EVENT = MemoryLayout.structLayout(
            JAVA_INT.withName("events"), JAVA_LONG.withByteAlignment(4).withName("data"));
    private static final VarHandle EVENTS = EPOLL_EVENT.varHandle(MemoryLayout.PathElement.groupElement("events"));
    private static final VarHandle DATA = EPOLL_EVENT.varHandle(MemoryLayout.PathElement.groupElement("data"));

    private static final MethodHandle EPOLL_CREATE1 = libc("epoll_create1",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT), true);
    private static final MethodHandle EPOLL_CTL = libc("epoll_ctl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS), true);
    private static final MethodHandle EPOLL_WAIT = libc("epoll_wait",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), true);
    // The wait made per turn captures no errno: a capturing downcall allocates a slice of the capture segment per
    // call (SharedUtils.checkCaptureSegment) unless C2 scalar-replaces it, which it does not do reliably on this
    // path. wait() asks again with the capturing handle only when it failed.
    private static final MethodHandle EPOLL_WAIT_NO_ERRNO = libc("epoll_wait",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), false);
    static final MethodHandle CLOSE = libc("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT), false);

    private final Arena arena = Arena.ofAuto();
    private final MemorySegment events;
    private final MemorySegment ctlEvent = arena.allocate(EPOLL_EVENT);
    private final int maxEvents;
    private final int fd;
    private int ready;

    /** A new epoll instance that reports up to {@code maxEvents} ready fds per {@link #wait}. */
    public Epoll(int maxEvents) throws IOException {
        this.maxEvents = maxEvents;
        events = arena.allocate(EPOLL_EVENT, maxEvents);
        fd = check("epoll_create1", (int) invoke(EPOLL_CREATE1, Errno.state(), EPOLL_CLOEXEC));
    }

    /** The epoll instance's own fd: readable while a watched fd is ready (so it can be watched in turn). */
    public int fd() {
        return fd;
    }

    /** Watches {@code watched} for {@code interest} ({@link #EPOLLIN}, {@link #EPOLLOUT}, or 0 for nothing yet). */
    public void add(int watched, int interest, long token) throws IOException {
        ctl(EPOLL_CTL_ADD, "ADD", watched, interest, token);
    }

    public void modify(int watched, int interest, long token) throws IOException {
        ctl(EPOLL_CTL_MOD, "MOD", watched, interest, token);
    }

    /** Stops watching {@code watched} (closing an fd removes it from every epoll set already). */
    public void remove(int watched) throws IOException {
        ctl(EPOLL_CTL_DEL, "DEL", watched, 0, 0);
    }

    // Synchronized: the one ctlEvent segment is the call's argument.
    private synchronized void ctl(int op, String name, int watched, int interest, long token) throws IOException {
        EVENTS.set(ctlEvent, 0L, interest);
        DATA.set(ctlEvent, 0L, token);
        check("epoll_ctl(" + name + ", fd " + watched + ")",
                (int) invoke(EPOLL_CTL, Errno.state(), fd, op, watched, ctlEvent));
    }

    /**
     * Waits until a watched fd is ready or {@code timeoutMillis} passes (0: do not wait; -1: no limit); returns how
     * many are ready ({@link #token(int)}, {@link #events(int)}). A signal that interrupts the wait reports none.
     * Allocation-free unless the wait fails.
     */
    public int wait(int timeoutMillis) throws IOException {
        int n;
        MemorySegment state = null;
        try {
            n = (int) EPOLL_WAIT_NO_ERRNO.invokeExact(fd, events, maxEvents, timeoutMillis);
            if (n < 0) {
                // Interrupted by a signal, or broken: the errno is gone, so look again without waiting, capturing
                // it. An interruption does not happen again (nothing ready: 0); a broken epoll fails again.
                state = Errno.state();
                n = (int) EPOLL_WAIT.invokeExact(state, fd, events, maxEvents, 0);
            }
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (n < 0 && Errno.last() == Errno.EINTR) {
            n = 0;
        }
        ready = Math.max(n, 0);
        return check("epoll_wait", n);
    }

    /** The token of the {@code index}th fd the last {@link #wait} reported. */
    public long token(int index) {
        return (long) DATA.get(events, checkIndex(index) * EPOLL_EVENT.byteSize());
    }

    /** What the {@code index}th fd the last {@link #wait} reported is ready for. */
    public int events(int index) {
        return (int) EVENTS.get(events, checkIndex(index) * EPOLL_EVENT.byteSize());
    }

    private long checkIndex(int index) {
        if (index < 0 || index >= ready) {
            throw new IndexOutOfBoundsException(index);
        }
        return index;
    }

    @Override
    public void close() {
        closeFd(fd);
    }

    static void closeFd(int fd) {
        try {
            int ignored = (int) CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code result}, or an IOException naming {@code call} and the captured errno if it is negative. */
    static int check(String call, int result) throws IOException {
        if (result < 0) {
            throw new IOException(call + " failed: " + Errno.describe(Errno.last()));
        }
        return result;
    }

    static MethodHandle libc(String name, FunctionDescriptor descriptor, boolean captureErrno) {
        return captureErrno
                ? Downcalls.LINKER.downcallHandle(Downcalls.LINKER.defaultLookup().findOrThrow(name), descriptor,
                        CAPTURE)
                : Downcalls.LINKER.downcallHandle(Downcalls.LINKER.defaultLookup().findOrThrow(name), descriptor);
    }

    private static Object invoke(MethodHandle handle, Object... args) {
        try {
            return handle.invokeWithArguments(args);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
