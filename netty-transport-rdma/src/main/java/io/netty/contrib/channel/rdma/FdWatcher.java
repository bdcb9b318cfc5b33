package io.netty.contrib.channel.rdma;

import io.netty.channel.IoHandle;
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
 * The plain file descriptors registered with one {@link RdmaIoHandler}: the project's {@link FdIoHandle}s and
 * Netty's own epoll channels ({@code EpollIoHandle}s, through {@link EpollHandles}). They share an epoll instance
 * of their own whose fd the loop's epoll watches like its other fds; each fd is in it with the interest its handle
 * asks for (edge-triggered if it asks for {@code EPOLLET}). So a loop blocked in {@code epoll_wait} wakes when one
 * of them is ready, and a busy loop looks ({@link #processReady()}, one {@code epoll_wait} without waiting)
 * whenever it looks for rdma_cm events: the RDMA path pays nothing per turn for them. Loop-thread confined (the
 * epoll registrations' {@code submit} and {@code cancel} excepted, see {@link EpollHandles}).
 */
final class FdWatcher implements AutoCloseable {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(FdWatcher.class);
    private static final int MAX_EVENTS = 32;
    /**
     * Netty's {@code EpollIoHandle}, or null without netty-transport-classes-epoll (an optional dependency): a
     * class looked up by name, so nothing here links against the epoll classes.
     */
    private static final Class<?> EPOLL_IO_HANDLE = epollIoHandleClass();

    private final FdIoHandle.FdIoEvent event = new FdIoHandle.FdIoEvent();
    private final IntObjectMap<Watched> watched = new IntObjectHashMap<>();
    final ThreadAwareExecutor executor;
    final Epoll epoll;
    /** Created by the first epoll handle: only then are the epoll classes loaded. */
    private EpollHandles epollHandles;
    private int nextId;

    FdWatcher(ThreadAwareExecutor executor) throws IOException {
        this.executor = executor;
        epoll = new Epoll(MAX_EVENTS);
    }

    /** Whether {@code type} is a handle of Netty's epoll channels (false when their classes are absent). */
    static boolean isEpollHandle(Class<?> type) {
        return EPOLL_IO_HANDLE != null && EPOLL_IO_HANDLE.isAssignableFrom(type);
    }

    /** Whether netty-transport-classes-epoll is on the class path (its native library may still be missing). */
    static boolean epollClassesPresent() {
        return EPOLL_IO_HANDLE != null;
    }

    /** Whether this watcher takes handles of {@code type}. */
    static boolean isCompatible(Class<? extends IoHandle> type) {
        return FdIoHandle.class.isAssignableFrom(type) || isEpollHandle(type);
    }

    /**
     * Loads Netty's native epoll library if the epoll classes are there: their channels expect the loop to have
     * done so before they are created (Netty's {@code EpollIoHandler} does it when it is created). Without the
     * library {@code Epoll.unavailabilityCause()} says why, as with Netty's own loop.
     */
    static void loadNettyEpoll() {
        if (EPOLL_IO_HANDLE != null) {
            try {
                Class.forName("io.netty.channel.epoll.Epoll", true, EPOLL_IO_HANDLE.getClassLoader());
            } catch (ClassNotFoundException | LinkageError e) {
                logger.debug("Netty's epoll classes are incomplete: their channels cannot run on RDMA loops", e);
            }
        }
    }

    private static Class<?> epollIoHandleClass() {
        try {
            return Class.forName("io.netty.channel.epoll.EpollIoHandle", false, FdWatcher.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return null;
        }
    }

    /** The fd of this watcher's epoll instance: readable while a watched fd is ready. */
    int fd() {
        return epoll.fd();
    }

    /** Starts watching {@code handle}'s fd ({@link #isCompatible}); {@link IoRegistration#submit} says for what. */
    IoRegistration register(IoHandle handle) throws IOException {
        if (handle instanceof FdIoHandle fdHandle) {
            FdRegistration r = new FdRegistration(newId(), fdHandle);
            epoll.add(fdHandle.fd(), 0, r.id);
            watched.put(r.id, r);
            fdHandle.registered();
            return r;
        }
        if (epollHandles == null) {
            epollHandles = new EpollHandles(this);
        }
        return epollHandles.register(handle);
    }

    /** A token for a new watched fd: never 0, never one in use. */
    int newId() {
        int id;
        do {
            id = ++nextId;
        } while (id == 0 || watched.containsKey(id));
        return id;
    }

    void add(Watched w) {
        watched.put(w.id, w);
    }

    void remove(Watched w) {
        if (watched.get(w.id) == w) {
            watched.remove(w.id);
        }
    }

    /** Dispatches the readiness of every watched fd that is ready now, without waiting; returns how many. */
    int processReady() {
        if (watched.isEmpty()) {
            return 0;
        }
        int n;
        try {
            n = epoll.wait(0);
        } catch (IOException e) {
            logger.warn("epoll_wait of the fd watcher failed", e);
            return 0;
        }
        // More than MAX_EVENTS ready: the rest stay on epoll's ready list (edge-triggered ones too) and keep this
        // epoll's fd readable, so the loop's next look takes them.
        for (int i = 0; i < n; i++) {
            Watched w = watched.get((int) epoll.token(i));
            if (w == null) {
                continue;
            }
            try {
                w.ready(epoll.events(i));
            } catch (Throwable t) {
                logger.warn("failed to handle events 0x{} of {}", Integer.toHexString(epoll.events(i)), w, t);
            }
        }
        return n;
    }

    /** Closes every registered handle (the loop shuts down). */
    void closeHandles() {
        for (Watched w : watched.values().toArray(new Watched[0])) {
            try {
                w.closeHandle();
            } catch (Exception e) {
                logger.warn("failed to close {}", w, e);
            }
        }
    }

    @Override
    public void close() {
        epoll.close();
        if (epollHandles != null) {
            epollHandles.close();
        }
    }

    /** One watched fd, by its token in the epoll instance. */
    abstract static class Watched {
        final int id;

        Watched(int id) {
            this.id = id;
        }

        /** epoll reported {@code events} ({@code EPOLL*} bits) for the fd; loop thread. */
        abstract void ready(int events);

        /** The loop shuts down: close the handle. */
        abstract void closeHandle() throws Exception;
    }

    /** One {@link FdIoHandle}. {@link #submit} sets the readiness to report (loop thread); the result is 0. */
    private final class FdRegistration extends Watched implements IoRegistration {
        final FdIoHandle handle;
        boolean valid = true;

        FdRegistration(int id, FdIoHandle handle) {
            super(id);
            this.handle = handle;
        }

        @Override
        void ready(int events) {
            if (valid) {
                event.events(events);
                handle.handle(this, event);
            }
        }

        @Override
        void closeHandle() throws Exception {
            handle.close();
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
            FdWatcher.this.remove(this);
            try {
                epoll.remove(handle.fd());
            } catch (IOException e) {
                // Closed first (closing an fd removes it from every epoll set): nothing left to remove.
                logger.debug("epoll_ctl(DEL) of {}", handle, e);
            }
            handle.unregistered();
        }

        @Override
        public String toString() {
            return "FdRegistration(" + handle + ")";
        }
    }
}
