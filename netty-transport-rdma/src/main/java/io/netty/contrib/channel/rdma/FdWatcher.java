package io.netty.contrib.channel.rdma;

import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.collection.IntObjectMap;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

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
 * The plain file descriptors ({@link FdIoHandle}s) registered with one {@link RdmaIoHandler}: an epoll instance of
 * their own, level-triggered, whose fd the loop's epoll watches like its other fds. So a loop blocked in
 * {@code epoll_wait} wakes when one of them is ready, and a busy loop looks ({@link #processReady()}, one
 * {@code epoll_wait} without waiting) whenever it looks for rdma_cm events. Loop-thread confined.
 */
final class FdWatcher implements AutoCloseable {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(FdWatcher.class);
    private static final int EPOLL_CTL_ADD = 1;
    private static final int EPOLL_CTL_DEL = 2;
    private static final int EPOLL_CTL_MOD = 3;
    private static final int EPOLL_CLOEXEC = 0x80000;
    private static final int MAX_EVENTS = 32;

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
    private static final MethodHandle CLOSE;

    static {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        EPOLL_CREATE1 = linker.downcallHandle(libc.findOrThrow("epoll_create1"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT), errno);
        EPOLL_CTL = linker.downcallHandle(libc.findOrThrow("epoll_ctl"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS), errno);
        EPOLL_WAIT = linker.downcallHandle(libc.findOrThrow("epoll_wait"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        CLOSE = linker.downcallHandle(libc.findOrThrow("close"), FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    }

    private final Arena arena = Arena.ofAuto();
    private final MemorySegment errnoState = arena.allocate(CAPTURE);
    private final MemorySegment events = arena.allocate(EPOLL_EVENT, MAX_EVENTS);
    private final MemorySegment ctlEvent = arena.allocate(EPOLL_EVENT);
    private final FdIoHandle.FdIoEvent event = new FdIoHandle.FdIoEvent();
    private final IntObjectMap<FdRegistration> registrations = new IntObjectHashMap<>();
    private final ThreadAwareExecutor executor;
    private final int epollFd;
    private int nextId;

    FdWatcher(ThreadAwareExecutor executor) throws IOException {
        this.executor = executor;
        epollFd = (int) invoke(EPOLL_CREATE1, errnoState, EPOLL_CLOEXEC);
        if (epollFd < 0) {
            throw new IOException("epoll_create1 failed: errno " + (int) ERRNO.get(errnoState, 0L));
        }
    }

    /** The fd of this watcher's epoll instance: readable while a watched fd is ready. */
    int fd() {
        return epollFd;
    }

    /** Starts watching {@code handle}'s fd, for nothing yet: {@link IoRegistration#submit} says what. */
    IoRegistration register(FdIoHandle handle) throws IOException {
        int id;
        do {
            id = ++nextId;
        } while (id == 0 || registrations.containsKey(id));
        FdRegistration r = new FdRegistration(id, handle);
        ctl(EPOLL_CTL_ADD, handle.fd(), 0, id);
        registrations.put(id, r);
        handle.registered();
        return r;
    }

    /** Dispatches the readiness of every watched fd that is ready now, without waiting; returns how many. */
    int processReady() {
        if (registrations.isEmpty()) {
            return 0;
        }
        int n;
        try {
            n = (int) EPOLL_WAIT.invokeExact(epollFd, events, MAX_EVENTS, 0);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        for (int i = 0; i < n; i++) {
            long offset = i * EPOLL_EVENT.byteSize();
            FdRegistration r = registrations.get((int) (long) DATA.get(events, offset));
            if (r == null || !r.valid) {
                continue;
            }
            event.events((int) EVENTS.get(events, offset));
            try {
                r.handle.handle(r, event);
            } catch (Throwable t) {
                logger.warn("failed to handle {} of {}", event, r.handle, t);
            }
        }
        return Math.max(n, 0);
    }

    /** Closes every registered handle (the loop shuts down). */
    void closeHandles() {
        for (FdRegistration r : registrations.values().toArray(new FdRegistration[0])) {
            try {
                r.handle.close();
            } catch (Exception e) {
                logger.warn("failed to close {}", r.handle, e);
            }
        }
    }

    @Override
    public void close() {
        try {
            int ignored = (int) CLOSE.invokeExact(epollFd);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private void ctl(int op, int fd, int interest, int id) throws IOException {
        EVENTS.set(ctlEvent, 0L, interest);
        DATA.set(ctlEvent, 0L, (long) id);
        if ((int) invoke(EPOLL_CTL, errnoState, epollFd, op, fd, ctlEvent) < 0) {
            throw new IOException("epoll_ctl(" + op + ", fd " + fd + ") failed: errno "
                    + (int) ERRNO.get(errnoState, 0L));
        }
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

    /** One watched fd. {@link #submit} sets the readiness to report (loop thread); the result is 0. */
    private final class FdRegistration implements IoRegistration {
        final int id;
        final FdIoHandle handle;
        boolean valid = true;

        FdRegistration(int id, FdIoHandle handle) {
            this.id = id;
            this.handle = handle;
        }

        @SuppressWarnings("unchecked")
        @Override
        public <T> T attachment() {
            return (T) this;
        }

        @Override
        public long submit(IoOps ops) {
            if (!(ops instanceof FdIoHandle.FdIoOps fdOps)) {
                throw new IllegalArgumentException("expected FdIoOps, got " + ops);
            }
            if (!valid) {
                throw new IllegalStateException("registration cancelled");
            }
            assert executor.isExecutorThread(Thread.currentThread());
            try {
                ctl(EPOLL_CTL_MOD, handle.fd(), fdOps.events(), id);
            } catch (IOException e) {
                throw new IllegalStateException(e.getMessage(), e);
            }
            return 0;
        }

        @Override
        public boolean isValid() {
            return valid;
        }

        @Override
        public boolean cancel() {
            if (!valid) {
                return false;
            }
            valid = false;
            if (executor.isExecutorThread(Thread.currentThread())) {
                remove();
            } else {
                executor.execute(this::remove);
            }
            return true;
        }

        private void remove() {
            registrations.remove(id);
            try {
                ctl(EPOLL_CTL_DEL, handle.fd(), 0, id);
            } catch (IOException e) {
                // Closed first (closing an fd removes it from every epoll set): nothing left to remove.
                logger.debug("epoll_ctl(DEL) of {}", handle, e);
            }
            handle.unregistered();
        }
    }
}
