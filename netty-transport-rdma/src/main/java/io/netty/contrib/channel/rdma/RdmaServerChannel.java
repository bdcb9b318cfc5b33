package io.netty.contrib.channel.rdma;

import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.RejectReason;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

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
public final class RdmaServerChannel extends AbstractRdmaChannel implements ServerSocketChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaServerChannel.class);
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);
    /** Requests refused and accepted connections dropped, this server's and its children's (from their loops). */
    private final RefusalLog refusals = new RefusalLog(logger, this);

    private final RdmaServerChannelConfig config = new RdmaServerChannelConfig(this);
    private final ArrayDeque<RdmaChannel> accepted = new ArrayDeque<>();
    /** Accepted connections not yet established; children update it from their own loops. */
    private final AtomicInteger pendingHandshakes = new AtomicInteger();
    /** Open connections (pending or established) per remote address, when they are limited. */
    private final ConcurrentHashMap<InetAddress, AtomicInteger> perAddress = new ConcurrentHashMap<>();
    private CmId cmId;
    /** The TCP listener of a dual-stack server ({@link RdmaChannelOption#TCP_LISTEN}), else null. */
    private TcpListener tcpListener;
    private boolean open = true;
    private boolean readPending;
    private volatile InetSocketAddress local;

    public RdmaServerChannel() {
        super(null);
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
        return open && (cmId != null || tcpListener != null);
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
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
    protected SocketAddress remoteAddress0() {
        return null;
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaServerUnsafe();
    }

    @Override
    protected void doBind(SocketAddress localAddress) throws Exception {
        InetSocketAddress address = (InetSocketAddress) localAddress;
        boolean rdma = registration.handler().cmChannel() != null;
        if (!config.isTcpListen()) {
            if (!rdma) {
                throw new IllegalStateException("cannot listen for RDMA on " + address + ": no RDMA on this host ("
                        + registration.handler().withoutRdmaCause() + "); TCP_LISTEN would serve TCP clients");
            }
            cmId = listenRdma(address);
            return;
        }
        String unavailable = TcpFallback.tcpUnavailability();
        if (unavailable != null) {
            throw new IllegalStateException("TCP_LISTEN: cannot listen on TCP: " + unavailable);
        }
        if (!rdma) {
            logger.info("{}: no RDMA on this host, listening on TCP only ({})", address,
                    registration.handler().withoutRdmaCause());
        }
        // TCP first: for port 0 the kernel picks a port free for TCP, and the RDMA port space (its own) takes that
        // number too; the other way round rdma_cm's choice could be taken in TCP.
        TcpListener listener = new TcpListener(this, config.getBacklog());
        io.netty.channel.ChannelFuture bound = listener.bind(eventLoop(), address);
        if (!bound.isSuccess()) {
            listener.close();
            Throwable cause = bound.cause();
            throw new java.io.IOException("TCP_LISTEN: cannot listen on TCP at " + address + ": "
                    + (cause == null ? "bind did not complete" : cause.getMessage()), cause);
        }
        local = listener.localAddress();
        if (rdma) {
            try {
                cmId = listenRdma(new InetSocketAddress(address.getAddress(), local.getPort()));
            } catch (RuntimeException e) {
                listener.close();
                throw e;
            }
        }
        tcpListener = listener;
    }

    /** An rdma_cm id bound to {@code address} and listening; {@link #local} is its address. */
    private CmId listenRdma(InetSocketAddress address) {
        CmId id = registration.handler().cmChannel().createId();
        id.attach(unsafe());
        try {
            id.bind(address);
            id.listen(config.getBacklog());
            local = id.localAddress();
        } catch (RuntimeException e) {
            id.close();
            throw e;
        }
        return id;
    }

    /** A listener bound to an address of the removed device closes; one on every address goes on serving. */
    @Override
    void onDeviceRemoved(long contextAddress, String cause) {
        CmId id = cmId;
        if (!open || id == null || id.verbsAddress() != contextAddress) {
            return;
        }
        logger.warn("{}: {}: the listener closes", this, cause);
        unsafe().close(unsafe().voidPromise());
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
        if (tcpListener != null) {
            tcpListener.close();
            tcpListener = null;
        }
    }

    /** The TCP listener accepted {@code socket} (an unregistered socket channel): a child on its TCP path. */
    void tcpAccepted(io.netty.channel.Channel socket) {
        InetSocketAddress from = (InetSocketAddress) socket.remoteAddress();
        String refused = open ? admit(from) : "the server is closing";
        if (refused != null) {
            refusals.log(RefusalLog.Kind.REFUSED, "closed a TCP connection from " + from + ": " + refused, null);
            RdmaEvents.rejected(localAddress(), from, refused);
            socket.unsafe().closeForcibly();
            return;
        }
        // Connected already: nothing to establish.
        handshakeDone();
        accepted.add(new RdmaChannel(this, socket));
    }

    /** The TCP listener's accept batch is done. */
    void tcpAcceptedAll() {
        deliverAccepted();
    }

    void tcpAcceptFailed(Throwable cause) {
        refusals.log(RefusalLog.Kind.ACCEPT_FAILED, "TCP accept failed: " + cause, cause);
    }

    @Override
    protected void doBeginRead() {
        readPending = true;
        deliverAccepted();
    }

    // A listener has no peer to disconnect from or write to (as in Netty's AbstractServerChannel).
    @Override
    protected void doDisconnect() {
        throw new UnsupportedOperationException();
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) {
        throw new UnsupportedOperationException();
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        throw new UnsupportedOperationException();
    }

    @Override
    void onCmEvent(CmEvent event) {
        if (event.type() == CmEventType.DEVICE_REMOVAL && cmId != null) {
            // Its address was on the device: every channel and listener of the process there closes.
            onDeviceRemoved(cmId.verbsAddress(), RdmaDevices.removed(cmId.verbs()));
            return;
        }
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
            rejectAndClose(id, RejectReason.REASON_NOT_ACCEPTING);
            return;
        }
        ConnectParameters peer;
        try {
            peer = ConnectParameters.parse(data);
        } catch (ProtocolException e) {
            refuse(id, id.remoteAddress(), e.getMessage(), e.rejectReason());
            return;
        }
        InetSocketAddress from = id.remoteAddress();
        String refused = admit(from);
        if (refused != null) {
            refuse(id, from, refused, RejectReason.REASON_NO_RESOURCES);
            return;
        }
        accepted.add(new RdmaChannel(this, id, peer));
        deliverAccepted();
    }

    /** Refuses a request this server does not take: logged (rate-limited, {@link RefusalLog}) and recorded for JFR. */
    private void refuse(CmId id, InetSocketAddress from, String why, int reason) {
        refusals.log(RefusalLog.Kind.REFUSED, "rejected a connection request from " + from + ": " + why, null);
        RdmaEvents.rejected(localAddress(), from, why);
        rejectAndClose(id, reason);
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

    /** An accepted connection is dropped before it was established (any thread): logged, rate-limited. */
    void dropped(RefusalLog.Kind kind, String message, Throwable cause) {
        refusals.log(kind, message, cause);
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

    /** The id of a request not handed to a child is this server's to free. */
    private static void rejectAndClose(CmId id, int reason) {
        try {
            reject(id, reason);
        } finally {
            id.close();
        }
    }

    final class RdmaServerUnsafe extends AbstractRdmaUnsafe {
        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            promise.setFailure(new UnsupportedOperationException());
        }
    }
}
