package io.netty.contrib.channel.rdma;

import io.netty.channel.IoHandle;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.channel.epoll.EpollIoEvent;
import io.netty.channel.epoll.EpollIoHandle;
import io.netty.channel.epoll.EpollIoOps;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.collection.IntObjectMap;
import io.netty.util.internal.StringUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * Netty's own epoll channels ({@link EpollIoHandle}s: {@code EpollSocketChannel}, {@code EpollDatagramChannel},
 * the domain socket channels, ...) on one RDMA loop, in its {@link FdWatcher}. A registration behaves as one of
 * Netty's {@code EpollIoHandler}: pending until the first {@code submit} of ops other than
 * {@link EpollIoOps#NONE} adds the fd with those ops ({@code EPOLL_CTL_ADD}, edge-triggered when the ops have
 * {@code EPOLLET}), later ones modify it, {@code NONE} removes it ({@code EPOLL_CTL_DEL}; a later submit adds it
 * again, where Netty's loop would fail on {@code EPOLL_CTL_MOD}); {@code submit} after {@code cancel} returns -1;
 * {@code cancel} removes the fd on the loop thread and then calls {@code unregistered()}. Readiness goes to
 * {@code handle(registration, EpollIoEvent)} on the loop thread.
 *
 * <p>This class alone links against netty-transport-classes-epoll, and is loaded only when an
 * {@code EpollIoHandle} registers: without those classes the loop works as before. One per loop; loop-thread
 * confined, but for {@code submit} and {@code cancel}, which any thread may call (as with Netty's loop).
 *
 * <p>The channels cast the registration's attachment to {@code io.netty.channel.epoll.NativeArrays}, a
 * package-private class (their iovec and datagram arrays, one per loop): made here by reflection and freed with
 * the loop. On the module path that needs
 * {@code --add-opens io.netty.transport.classes.epoll/io.netty.channel.epoll=io.netty.contrib.transport.rdma}.
 */
final class EpollHandles implements AutoCloseable {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(EpollHandles.class);
    private static final String NATIVE_ARRAYS = "io.netty.channel.epoll.NativeArrays";

    private final FdWatcher watcher;
    private final Object nativeArrays;
    /** One immutable event per readiness value seen, so dispatch allocates nothing. */
    private final IntObjectMap<EpollIoEvent> events = new IntObjectHashMap<>();

    EpollHandles(FdWatcher watcher) {
        this.watcher = watcher;
        this.nativeArrays = newNativeArrays();
    }

    IoRegistration register(IoHandle handle) {
        if (!(handle instanceof EpollIoHandle epollHandle)) {
            throw new IllegalArgumentException("IoHandle of type " + StringUtil.simpleClassName(handle)
                    + " not supported");
        }
        EpollRegistration r = new EpollRegistration(watcher.newId(), epollHandle);
        watcher.add(r);
        handle.registered();
        return r;
    }

    private EpollIoEvent event(int value) {
        EpollIoEvent event = events.get(value);
        if (event == null) {
            event = new Event(EpollIoOps.valueOf(value));
            events.put(value, event);
        }
        return event;
    }

    @Override
    public void close() {
        try {
            Method free = nativeArrays.getClass().getDeclaredMethod("free");
            free.setAccessible(true);
            free.invoke(nativeArrays);
        } catch (ReflectiveOperationException | RuntimeException e) {
            logger.warn("cannot free the epoll channels' native arrays of an RDMA event loop", e);
        }
    }

    private static Object newNativeArrays() {
        try {
            Constructor<?> c = Class.forName(NATIVE_ARRAYS, true, EpollIoHandle.class.getClassLoader())
                    .getDeclaredConstructor();
            c.setAccessible(true);
            return c.newInstance();
        } catch (InvocationTargetException e) {
            throw new IllegalStateException("cannot create " + NATIVE_ARRAYS, e.getCause());
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot create " + NATIVE_ARRAYS + " for Netty's epoll channels on an"
                    + " RDMA event loop; on the module path, add --add-opens io.netty.transport.classes.epoll/"
                    + "io.netty.channel.epoll=io.netty.contrib.transport.rdma", e);
        }
    }

    private record Event(EpollIoOps ops) implements EpollIoEvent {
    }

    private enum State { PENDING, ADDED, CANCELLED }

    /** One epoll channel's fd. {@link #state} is guarded by this registration's lock, as in Netty's loop. */
    private final class EpollRegistration extends FdWatcher.Watched implements IoRegistration {
        final EpollIoHandle handle;
        private State state = State.PENDING;

        EpollRegistration(int id, EpollIoHandle handle) {
            super(id);
            this.handle = handle;
        }

        @Override
        void ready(int value) {
            handle.handle(this, event(value));
        }

        @Override
        void closeHandle() throws Exception {
            cancel();
            handle.close();
        }

        @SuppressWarnings("unchecked")
        @Override
        public <T> T attachment() {
            return (T) nativeArrays;
        }

        @Override
        public long submit(IoOps ops) {
            if (!(ops instanceof EpollIoOps epollOps)) {
                throw new IllegalArgumentException("IoOps of type " + StringUtil.simpleClassName(ops)
                        + " not supported");
            }
            int value = epollOps.value();
            int fd = handle.fd().intValue();
            try {
                synchronized (this) {
                    switch (state) {
                        case CANCELLED:
                            return -1;
                        case PENDING:
                            if (value != EpollIoOps.NONE.value()) {
                                watcher.epoll.add(fd, value, id);
                                state = State.ADDED;
                            }
                            return value;
                        default:
                            if (value == EpollIoOps.NONE.value()) {
                                // Nothing to wait for: out of the set, or EPOLLHUP / EPOLLERR would report forever.
                                watcher.epoll.remove(fd);
                                state = State.PENDING;
                            } else {
                                watcher.epoll.modify(fd, value, id);
                            }
                            return value;
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public synchronized boolean isValid() {
            return state != State.CANCELLED;
        }

        @Override
        public boolean cancel() {
            boolean added;
            synchronized (this) {
                if (state == State.CANCELLED) {
                    return false;
                }
                added = state == State.ADDED;
                state = State.CANCELLED;
            }
            if (watcher.executor.isExecutorThread(Thread.currentThread())) {
                remove(added);
            } else {
                watcher.executor.execute(() -> remove(added));
            }
            return true;
        }

        private void remove(boolean added) {
            watcher.remove(this);
            // A closed fd has left the set already, and its number may be another channel's by now.
            if (added && handle.fd().isOpen()) {
                try {
                    watcher.epoll.remove(handle.fd().intValue());
                } catch (IOException e) {
                    logger.debug("epoll_ctl(DEL) of {}", handle, e);
                }
            }
            handle.unregistered();
        }

        @Override
        public String toString() {
            return "EpollRegistration(" + handle + ")";
        }
    }
}
