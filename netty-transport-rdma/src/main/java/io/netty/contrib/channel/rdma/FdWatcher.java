package io.netty.contrib.channel.rdma;

import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.contrib.channel.rdma.internal.verbs.Epoll;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.collection.IntObjectMap;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;

/**
 * The plain file descriptors ({@link FdIoHandle}s) registered with one {@link RdmaIoHandler}: an epoll instance of
 * their own, level-triggered, whose fd the loop's epoll watches like its other fds. So a loop blocked in
 * {@code epoll_wait} wakes when one of them is ready, and a busy loop looks ({@link #processReady()}, one
 * {@code epoll_wait} without waiting) whenever it looks for rdma_cm events. Loop-thread confined.
 */
final class FdWatcher implements AutoCloseable {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(FdWatcher.class);
    private static final int MAX_EVENTS = 32;

    private final FdIoHandle.FdIoEvent event = new FdIoHandle.FdIoEvent();
    private final IntObjectMap<FdRegistration> registrations = new IntObjectHashMap<>();
    private final ThreadAwareExecutor executor;
    private final Epoll epoll;
    private int nextId;

    FdWatcher(ThreadAwareExecutor executor) throws IOException {
        this.executor = executor;
        epoll = new Epoll(MAX_EVENTS);
    }

    /** The fd of this watcher's epoll instance: readable while a watched fd is ready. */
    int fd() {
        return epoll.fd();
    }

    /** Starts watching {@code handle}'s fd, for nothing yet: {@link IoRegistration#submit} says what. */
    IoRegistration register(FdIoHandle handle) throws IOException {
        int id;
        do {
            id = ++nextId;
        } while (id == 0 || registrations.containsKey(id));
        FdRegistration r = new FdRegistration(id, handle);
        epoll.add(handle.fd(), 0, id);
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
            n = epoll.wait(0);
        } catch (IOException e) {
            logger.warn("epoll_wait of the fd watcher failed", e);
            return 0;
        }
        for (int i = 0; i < n; i++) {
            FdRegistration r = registrations.get((int) epoll.token(i));
            if (r == null || !r.valid) {
                continue;
            }
            event.events(epoll.events(i));
            try {
                r.handle.handle(r, event);
            } catch (Throwable t) {
                logger.warn("failed to handle {} of {}", event, r.handle, t);
            }
        }
        return n;
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
        epoll.close();
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
                epoll.modify(handle.fd(), fdOps.events(), id);
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
                epoll.remove(handle.fd());
            } catch (IOException e) {
                // Closed first (closing an fd removes it from every epoll set): nothing left to remove.
                logger.debug("epoll_ctl(DEL) of {}", handle, e);
            }
            handle.unregistered();
        }
    }
}
