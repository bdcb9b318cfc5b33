package io.netty.contrib.channel.rdma;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The loop's blocking wait: an epoll instance over the completion channel, the rdma_cm event channel and an
 * eventfd that {@link RdmaIoHandler#wakeup()} writes. libc through FFM; loop-thread confined except
 * {@link #wakeup()}.
 */
final class LinuxEpoll implements AutoCloseable {
    private static final int EPOLLIN = 0x001;
    private static final int EPOLL_CTL_ADD = 1;
    private static final int EPOLL_CTL_DEL = 2;
    private static final int EPOLL_CLOEXEC = 0x80000;
    private static final int EFD_CLOEXEC = 0x80000;
    private static final int EFD_NONBLOCK = 0x800;
    private static final int F_GETFL = 3;
    private static final int F_SETFL = 4;
    private static final int O_NONBLOCK = 0x800;
    private static final int EINTR = 4;
    private static final int EAGAIN = 11;
    private static final int MAX_EVENTS = 8;

    // struct epoll_event is packed on x86_64: u32 events; u64 data.
    private static final StructLayout EPOLL_EVENT = MemoryLayout.structLayout(
            JAVA_INT.withName("events"), JAVA_LONG.withByteAlignment(4).withName("data"));
    private static final VarHandle EVENTS = EPOLL_EVENT.varHandle(MemoryLayout.PathElement.groupElement("events"));
    private static final VarHandle DATA = EPOLL_EVENT.varHandle(MemoryLayout.PathElement.groupElement("data"));

    private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final MethodHandle EPOLL_CREATE1;
    private static final MethodHandle EPOLL_CTL;
    private static final MethodHandle EPOLL_WAIT;
    // The calls made per wait and per wakeup capture no errno: a capturing downcall allocates a slice of the
    // capture segment per call (SharedUtils.checkCaptureSegment) unless C2 scalar-replaces it, which it does not do
    // reliably on these paths. epoll_wait asks again with the capturing handle only when it failed.
    private static final MethodHandle EPOLL_WAIT_NO_ERRNO;
    private static final MethodHandle EVENTFD;
    private static final MethodHandle READ_NO_ERRNO;
    private static final MethodHandle WRITE_NO_ERRNO;
    private static final MethodHandle CLOSE;
    private static final MethodHandle FCNTL;

    static {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        EPOLL_CREATE1 = linker.downcallHandle(libc.findOrThrow("epoll_create1"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT), errno);
        EPOLL_CTL = linker.downcallHandle(libc.findOrThrow("epoll_ctl"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS), errno);
        EPOLL_WAIT = linker.downcallHandle(libc.findOrThrow("epoll_wait"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), errno);
        EPOLL_WAIT_NO_ERRNO = linker.downcallHandle(libc.findOrThrow("epoll_wait"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        EVENTFD = linker.downcallHandle(libc.findOrThrow("eventfd"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT), errno);
        READ_NO_ERRNO = linker.downcallHandle(libc.findOrThrow("read"),
                FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
        WRITE_NO_ERRNO = linker.downcallHandle(libc.findOrThrow("write"),
                FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
        CLOSE = linker.downcallHandle(libc.findOrThrow("close"), FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        FCNTL = linker.downcallHandle(libc.findOrThrow("fcntl"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), errno,
                Linker.Option.firstVariadicArg(2));
    }

    // Freed by the GC, not by close(): wakeup() may run on another thread while the loop shuts down.
    private final Arena arena = Arena.ofAuto();
    private final MemorySegment errnoState = arena.allocate(CAPTURE);
    private final MemorySegment events = arena.allocate(EPOLL_EVENT, MAX_EVENTS);
    private final MemorySegment one = arena.allocate(JAVA_LONG);
    private final MemorySegment drain = arena.allocate(JAVA_LONG);
    private final MemorySegment ctlEvent = arena.allocate(EPOLL_EVENT);
    private final int epollFd;
    private final int eventFd;
    private int ready;
    private volatile boolean closed;

    LinuxEpoll() throws IOException {
        epollFd = call("epoll_create1", (int) invoke(EPOLL_CREATE1, errnoState, EPOLL_CLOEXEC));
        try {
            eventFd = call("eventfd", (int) invoke(EVENTFD, errnoState, 0, EFD_CLOEXEC | EFD_NONBLOCK));
        } catch (IOException e) {
            closeFd(epollFd);
            throw e;
        }
        one.set(JAVA_LONG, 0, 1L);
        add(eventFd, eventFd);
    }

    /** Watches {@code fd} for readability; {@code token} comes back from {@link #readyToken(int)}. */
    void add(int fd, long token) throws IOException {
        setNonBlocking(fd);
        EVENTS.set(ctlEvent, 0L, EPOLLIN);
        DATA.set(ctlEvent, 0L, token);
        call("epoll_ctl(ADD)", (int) invoke(EPOLL_CTL, errnoState, epollFd, EPOLL_CTL_ADD, fd, ctlEvent));
    }

    void remove(int fd) throws IOException {
        call("epoll_ctl(DEL)", (int) invoke(EPOLL_CTL, errnoState, epollFd, EPOLL_CTL_DEL, fd, ctlEvent));
    }

    private void setNonBlocking(int fd) throws IOException {
        int flags = call("fcntl(F_GETFL)", (int) invoke(FCNTL, errnoState, fd, F_GETFL, 0));
        call("fcntl(F_SETFL)", (int) invoke(FCNTL, errnoState, fd, F_SETFL, flags | O_NONBLOCK));
    }

    /**
     * Blocks until a watched fd is readable, the eventfd is written, or {@code timeoutMillis} passes (-1 = no
     * limit). Returns how many fds are ready; the eventfd is drained here. Allocation-free unless the wait fails.
     */
    int await(int timeoutMillis) throws IOException {
        int n;
        try {
            n = (int) EPOLL_WAIT_NO_ERRNO.invokeExact(epollFd, events, MAX_EVENTS, timeoutMillis);
            if (n < 0) {
                // Interrupted by a signal, or broken: the errno is gone, so look again without waiting, capturing
                // it. An interruption does not happen again (nothing ready: 0); a broken epoll fails again.
                n = (int) EPOLL_WAIT.invokeExact(errnoState, epollFd, events, MAX_EVENTS, 0);
            }
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        ready = Math.max(n, 0);
        if (n < 0) {
            if ((int) ERRNO.get(errnoState, 0L) == EINTR) {
                return ready = 0;
            }
            call("epoll_wait", n);
        }
        for (int i = 0; i < n; i++) {
            if (readyToken(i) == eventFd) {
                drainEventFd();
            }
        }
        return n;
    }

    long readyToken(int index) {
        if (index >= ready) {
            throw new IndexOutOfBoundsException(index);
        }
        return (long) DATA.get(events, index * EPOLL_EVENT.byteSize());
    }

    /**
     * Reads the eventfd's counter back to 0 (non-blocking; nothing to read, -1 with EAGAIN, is fine, and no other
     * error is possible on an open eventfd with an 8-byte buffer). Allocation-free.
     */
    private void drainEventFd() {
        try {
            long n = (long) READ_NO_ERRNO.invokeExact(eventFd, drain, 8L);
            assert n == 8 || n == -1 : n;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Makes a blocked {@link #await(int)} return. Any thread; allocation-free. A full counter (EAGAIN) already
     * wakes the loop; an eventfd closed meanwhile (EBADF, shutdown) has nobody left to wake.
     */
    void wakeup() {
        if (closed) {
            return;
        }
        try {
            long n = (long) WRITE_NO_ERRNO.invokeExact(eventFd, one, 8L);
            assert n == 8 || n == -1 : n;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    @Override
    public void close() {
        closed = true;
        closeFd(eventFd);
        closeFd(epollFd);
    }

    private static void closeFd(int fd) {
        try {
            int ignored = (int) CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private int call(String name, int result) throws IOException {
        if (result < 0) {
            int errno = (int) ERRNO.get(errnoState, 0L);
            throw new IOException(name + " failed: errno " + errno);
        }
        return result;
    }

    private static Object invoke(MethodHandle handle, Object... args) {
        try {
            return handle.invokeWithArguments(args);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
