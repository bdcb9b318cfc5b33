package io.netty.contrib.channel.rdma;

import io.netty.channel.AbstractServerChannel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.RejectReason;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Listens for RDMA connections through rdma_cm and accepts each as an {@link RdmaChannel}. A
 * {@link ServerSocketChannel}, so {@code ServerBootstrap} code written for TCP works unchanged.
 */
public final class RdmaServerChannel extends AbstractServerChannel implements ServerSocketChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaServerChannel.class);
    private final RefusalLog refusals = new RefusalLog(logger);

    private final RdmaServerChannelConfig config = new RdmaServerChannelConfig(this);
    private final ArrayDeque<RdmaChannel> accepted = new ArrayDeque<>();
    /** Accepted connections not yet established; children update it from their own loops. */
    private final AtomicInteger pendingHandshakes = new AtomicInteger();
    /** Open connections (pending or established) per remote address, when they are limited. */
    private final ConcurrentHashMap<InetAddress, AtomicInteger> perAddress = new ConcurrentHashMap<>();
    private IoRegistration ioRegistration;
    private RdmaIoHandler.Registration registration;
    private CmId cmId;
    private boolean open = true;
    private boolean readPending;
    private volatile InetSocketAddress local;

    public RdmaServerChannel() {
    }

    @Override
    public RdmaServerChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public boolean isActive() {
        return open && cmId != null;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return null;
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(RdmaServerUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaServerUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        ((IoEventLoop) eventLoop()).register((RdmaServerUnsafe) unsafe()).addListener(f -> {
            if (f.isSuccess()) {
                ioRegistration = (IoRegistration) f.getNow();
                registration = ioRegistration.attachment();
                promise.setSuccess();
            } else {
                promise.setFailure(f.cause());
            }
        });
    }

    @Override
    protected void doDeregister() {
        if (ioRegistration != null) {
            ioRegistration.cancel();
        }
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        CmId id = registration.handler().cmChannel().createId();
        id.attach(unsafe());
        try {
            id.bind((InetSocketAddress) localAddress);
            id.listen(config.getBacklog());
            local = id.localAddress();
        } catch (RuntimeException e) {
            id.close();
            throw e;
        }
        cmId = id;
    }

    @Override
    protected void doClose() {
        open = false;
        RdmaChannel child;
        while ((child = accepted.poll()) != null) {
            child.unsafe().closeForcibly();
        }
        if (cmId != null) {
            // Not now: a connection request for it may be being handled.
            registration.handler().closeLater(cmId);
            cmId = null;
        }
    }

    @Override
    protected void doBeginRead() {
        readPending = true;
        deliverAccepted();
    }

    private void onCmEvent(CmEvent event) {
        if (event.type() != CmEventType.CONNECT_REQUEST) {
            logger.debug("{}: ignoring rdma_cm event {}", this, CmEventType.name(event.type()));
            return;
        }
        CmId id = event.id();
        byte[] data = event.privateData();
        // Acknowledge before using the id: rejecting and destroying it, or rdma_migrate_id on the child's loop,
        // wait for its events to be acknowledged.
        event.ack();
        if (!open) {
            reject(id, RejectReason.REASON_NOT_ACCEPTING);
            return;
        }
        ConnectParameters peer;
        try {
            peer = ConnectParameters.parse(data);
        } catch (ProtocolException e) {
            refusals.refused(this + ": rejected a connection request from " + id.remoteAddress() + ": "
                    + e.getMessage());
            RdmaEvents.rejected(localAddress(), id.remoteAddress(), e.getMessage());
            reject(id, e.rejectReason());
            return;
        }
        InetSocketAddress from = id.remoteAddress();
        String refused = admit(from);
        if (refused != null) {
            refusals.refused(this + ": rejected a connection request from " + from + ": " + refused);
            RdmaEvents.rejected(localAddress(), from, refused);
            reject(id, RejectReason.REASON_NO_RESOURCES);
            return;
        }
        accepted.add(new RdmaChannel(this, id, peer));
        deliverAccepted();
    }

    /** Counts a new connection from {@code from} against the limits; returns why it is refused, or null. */
    private String admit(InetSocketAddress from) {
        int maxPending = config.getMaxPendingHandshakes();
        if (pendingHandshakes.incrementAndGet() > maxPending) {
            pendingHandshakes.decrementAndGet();
            return maxPending + " connections are being established already (MAX_PENDING_HANDSHAKES)";
        }
        int maxPerAddress = config.getMaxConnectionsPerAddress();
        if (maxPerAddress > 0 && from != null) {
            AtomicInteger count = perAddress.computeIfAbsent(from.getAddress(), a -> new AtomicInteger());
            if (count.incrementAndGet() > maxPerAddress) {
                count.decrementAndGet();
                pendingHandshakes.decrementAndGet();
                return from.getAddress() + " has " + maxPerAddress + " connections already (MAX_CONNECTIONS_PER_ADDRESS)";
            }
        }
        return null;
    }

    /** An accepted connection was established (any thread). */
    void handshakeDone() {
        pendingHandshakes.decrementAndGet();
    }

    /** An accepted connection closed (any thread); {@code pending}: before it was established. */
    void childClosed(InetSocketAddress from, boolean pending) {
        if (pending) {
            pendingHandshakes.decrementAndGet();
        }
        if (config.getMaxConnectionsPerAddress() > 0 && from != null) {
            AtomicInteger count = perAddress.get(from.getAddress());
            if (count != null && count.decrementAndGet() <= 0) {
                perAddress.remove(from.getAddress(), count);
            }
        }
    }

    private void deliverAccepted() {
        if (accepted.isEmpty() || !(readPending || config.isAutoRead())) {
            return;
        }
        readPending = false;
        RdmaChannel child;
        while ((child = accepted.poll()) != null) {
            pipeline().fireChannelRead(child);
        }
        pipeline().fireChannelReadComplete();
    }

    private static void reject(CmId id, int reason) {
        try {
            id.reject(RejectReason.encode(reason));
        } catch (RuntimeException e) {
            logger.debug("rdma_reject failed", e);
        } finally {
            id.close();
        }
    }

    final class RdmaServerUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            promise.setFailure(new UnsupportedOperationException());
        }

        @Override
        public void completion(WorkCompletions completions, int index) {
            // A listener has no queue pair.
        }

        @Override
        public void cmEvent(CmEvent event) {
            onCmEvent(event);
        }

        @Override
        public void completionBatchDone() {
        }

        @Override
        public boolean lingering() {
            return false;
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
