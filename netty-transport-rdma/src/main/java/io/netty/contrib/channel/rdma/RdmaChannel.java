package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.channel.IoRegistration;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.RejectReason;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.IbvEventType;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.QpAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.concurrent.Future;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.NotYetConnectedException;
import java.util.concurrent.TimeUnit;

/**
 * A connection over an RDMA reliable-connected queue pair, established through rdma_cm. A
 * {@link SocketChannel}, so pipelines written for TCP work unchanged; see {@link RdmaChannelConfig} for what
 * the socket options mean here.
 */
public final class RdmaChannel extends AbstractRdmaChannel implements SocketChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaChannel.class);
    /** Addresses handed out by the device and the pool, copied between without a segment per copy. */
    private static final MemorySegment ALL_MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);
    /** How long a closed channel waits for its last sends to complete before it tears the connection down. */
    private static final long LINGER_MILLIS = 10_000;

    private final RdmaChannelConfig config;
    private CmId cmId;
    /** {@link RdmaConnection#activity()} at the last progress check, and since when it has not changed. */
    private long lastActivity;
    private long idleSince;
    RdmaConnection connection; // package-private: tests print it when a transfer stalls
    /** The counters of the channel's connection, kept after it is torn down ({@link #metric()}). */
    volatile ConnectionCounters counters;
    private final RdmaChannelMetric metric = new RdmaChannelMetric(this);
    private final ConnectParameters acceptedPeer;

    /**
     * Where the channel is in its life; see {@link State}. Loop thread, except that {@link #isOpen()} and
     * {@link #isActive()} may be asked from anywhere.
     */
    private volatile State state = State.NEW;
    /**
     * The queue pair failed on its own, by an error completion (a retry budget run out, a refused write) or a
     * flush with nothing before it (kernel rxe's requester can fail that way): the peer may not know, an idle one
     * never notices, so the close still sends it a DREQ. Not after DISCONNECTED, a device or port event.
     */
    private boolean peerMayNotKnow;
    // Beside the state, not in it: each is true or false in several states, independently of the others. The
    // halves shut down (set only while active), the peer gone (seen while connecting, accepting, active or
    // lingering), a read() not served yet, a SHUTDOWN waiting for send credit.
    private boolean inputShutdown;
    private boolean outputShutdown;
    private boolean shutdownPending;
    private boolean peerGone;
    private boolean readPending;
    /** A client's connect, pending while {@link State#CONNECTING} and {@link State#ESTABLISHED}. */
    private ChannelPromise connectPromise;
    /** An accepted channel's registration, pending while {@link State#ACCEPTING}. */
    private ChannelPromise registerPromise;
    private Future<?> connectTimeoutFuture;
    private SocketAddress requestedRemoteAddress;
    private volatile InetSocketAddress local;
    private volatile InetSocketAddress remote;
    private volatile RdmaConnectionSettings connectionSettings;
    private boolean readScheduled;
    /** The TCP path, when this channel fell back to TCP or was accepted from a TCP client; see {@link #isTcp()}. */
    private volatile TcpPath tcp;
    private volatile String fallbackReason;
    /** With {@link RdmaChannelOption#TCP_FALLBACK}: the end of the RDMA attempt's time. */
    private Future<?> fallbackTimeoutFuture;
    private final Runnable readTask = () -> {
        readScheduled = false;
        readReady();
    };

    /** A client channel; connect it with {@link io.netty.bootstrap.Bootstrap}. */
    public RdmaChannel() {
        super(null);
        config = new RdmaChannelConfig(this, defaultAllocator());
        acceptedPeer = null;
    }

    /** A channel accepted by {@code parent}'s TCP listener: {@code socket} carries its bytes. */
    RdmaChannel(RdmaServerChannel parent, io.netty.channel.Channel socket) {
        super(parent);
        config = new RdmaChannelConfig(this, defaultAllocator());
        acceptedPeer = null;
        tcp = TcpPath.accepted(this, socket);
        local = (InetSocketAddress) socket.localAddress();
        remote = (InetSocketAddress) socket.remoteAddress();
    }

    /** The registered pool where this host has RDMA; elsewhere (a TCP-only channel) Netty's default. */
    private static io.netty.buffer.ByteBufAllocator defaultAllocator() {
        return Rdma.isAvailable() ? RdmaDevices.defaultAllocator() : io.netty.buffer.ByteBufAllocator.DEFAULT;
    }

    /** A channel accepted by {@code parent}: its rdma_cm id and the parameters the client offered. */
    RdmaChannel(RdmaServerChannel parent, CmId cmId, ConnectParameters peerParameters) {
        super(parent);
        config = new RdmaChannelConfig(this, RdmaDevices.defaultAllocator());
        this.cmId = cmId;
        this.acceptedPeer = peerParameters;
        this.local = cmId.localAddress();
        this.remote = cmId.remoteAddress();
    }

    @Override
    public ServerSocketChannel parent() {
        return (ServerSocketChannel) super.parent();
    }

    /**
     * Whether this channel's bytes travel over TCP rather than RDMA: a client that fell back
     * ({@link RdmaChannelOption#TCP_FALLBACK}, see {@link #fallbackReason()}), or a connection a dual-stack server
     * accepted from a TCP client ({@link RdmaChannelOption#TCP_LISTEN}). Known once the channel is active.
     */
    public boolean isTcp() {
        return tcp != null;
    }

    /** Why this client connected over TCP instead of RDMA, or null if it did not fall back. */
    public String fallbackReason() {
        return fallbackReason;
    }

    /**
     * What this channel's connection has done so far: bytes and messages by SEND and ring write, coalesced
     * writes, credit stalls and their time, rings offered and withdrawn, copies. Live; see {@link RdmaChannelMetric}.
     */
    public RdmaChannelMetric metric() {
        return metric;
    }

    /**
     * The path and transport settings the connection's queue pair runs with, as the device reports them once the
     * connection is established; {@code null} before.
     */
    public RdmaConnectionSettings connectionSettings() {
        return connectionSettings;
    }

    @Override
    public RdmaChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        State s = state;
        return s != State.LINGERING && s != State.CLOSED;
    }

    @Override
    public boolean isActive() {
        return state == State.ACTIVE;
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
        return (InetSocketAddress) super.remoteAddress();
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return remote;
    }

    @Override
    public boolean isInputShutdown() {
        return inputShutdown || !isActive();
    }

    @Override
    public boolean isOutputShutdown() {
        return outputShutdown || !isActive();
    }

    @Override
    public boolean isShutdown() {
        return isInputShutdown() && isOutputShutdown();
    }

    @Override
    public ChannelFuture shutdownOutput() {
        return shutdownOutput(newPromise());
    }

    @Override
    public ChannelFuture shutdownOutput(ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            ((AbstractUnsafe) unsafe()).shutdownOutput(promise);
        } else {
            loop.execute(() -> ((AbstractUnsafe) unsafe()).shutdownOutput(promise));
        }
        return promise;
    }

    @Override
    public ChannelFuture shutdownInput() {
        return shutdownInput(newPromise());
    }

    @Override
    public ChannelFuture shutdownInput(ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            shutdownInput0(promise);
        } else {
            loop.execute(() -> shutdownInput0(promise));
        }
        return promise;
    }

    private void shutdownInput0(ChannelPromise promise) {
        if (!isActive()) {
            promise.setFailure(new NotYetConnectedException());
            return;
        }
        // RDMA has no way to refuse the peer's data: stop delivering it; the peer's credit dries up.
        inputShutdown = true;
        promise.setSuccess();
    }

    @Override
    public ChannelFuture shutdown() {
        return shutdown(newPromise());
    }

    @Override
    public ChannelFuture shutdown(ChannelPromise promise) {
        ChannelFuture output = shutdownOutput();
        output.addListener((ChannelFutureListener) f -> shutdownInput(promise));
        return promise;
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaUnsafe();
    }

    @Override
    void registered(ChannelPromise promise) {
        if (tcp != null && parent() != null) {
            registerAcceptedTcp(promise);
            return;
        }
        if (acceptedPeer == null || connection != null) {
            promise.setSuccess();
            return;
        }
        registerPromise = promise;
        state = State.ACCEPTING;
        try {
            accept();
        } catch (Throwable t) {
            // Also a client that left while its request waited: rdma_accept fails with EINVAL.
            dropAccepted(RefusalLog.Kind.ACCEPT_FAILED, "could not accept it: " + t.getMessage(), t);
            return;
        }
        // A client that never completes the handshake (never sends its RTU) must not hold the QP forever.
        int timeoutMillis = config.getEstablishTimeoutMillis();
        connectTimeoutFuture = eventLoop().schedule(() -> {
            if (state == State.ACCEPTING) {
                dropAccepted(RefusalLog.Kind.TIMED_OUT, "not established within " + timeoutMillis + " ms", null);
            }
        }, timeoutMillis, TimeUnit.MILLISECONDS);
        // Not yet: an accepted TCP socket is connected, so pipelines expect an accepted channel to be
        // active from the start (a child handler may write in initChannel). The registration completes
        // when rdma_cm reports ESTABLISHED, and the pipeline sees the channel registered and active at
        // once; what arrives before then waits in the receive queue.
    }

    /** An accepted TCP connection is connected already: active as its socket joins this channel's loop. */
    private void registerAcceptedTcp(ChannelPromise promise) {
        TcpPath path = tcp;
        path.configure(config);
        path.register(eventLoop()).addListener((ChannelFutureListener) f -> {
            if (f.isSuccess()) {
                state = State.ACTIVE;
                RdmaEvents.accepted(local, remote, null, true);
                promise.setSuccess();
            } else {
                promise.setFailure(f.cause());
                path.close(0);
            }
        });
    }

    /**
     * An accepted channel that will not be established: one line in its server's log (rate-limited, as a peer
     * decides how often this happens), then closed and released like any channel, without its registration.
     */
    private void dropAccepted(RefusalLog.Kind kind, String why, Throwable cause) {
        ((RdmaServerChannel) parent()).dropped(kind, "dropped the connection from " + remote + ": " + why, cause);
        unsafe().close(unsafe().voidPromise());
    }

    /**
     * An accepted channel that was not established never completes its registration, and the loop forgets it here
     * (Netty deregisters only registered channels). Completing it either way would make Netty act on a connection
     * that never was one: a failure makes {@code ServerBootstrap} log a warning with the cause's stack trace per
     * connection (300 half-open handshakes: 3 900 lines), a success runs the child handler for a channel that never
     * becomes active. Only {@code ServerBootstrap}'s listener waits on it, and it goes with the channel.
     */
    private void abandonRegistration() {
        if (registerPromise == null) {
            return;
        }
        registerPromise = null;
        IoRegistration r = ioRegistration;
        if (r != null) {
            r.cancel();
        }
    }

    /** Takes over an accepted connection request on this channel's loop and accepts it. */
    private void accept() {
        RdmaIoHandler handler = registration.handler();
        cmId.migrate(handler.cmChannel());
        cmId.attach(unsafe());
        boolean own = FabricOptions.ownQueuePair(config, acceptedPeer);
        int pathMtu = 0;
        try {
            if (own) {
                pathMtu = FabricOptions.acceptPathMtu(cmId, config, acceptedPeer);
            }
            connection = new RdmaConnection(registration, eventLoop(), cmId, RdmaDevices.of(cmId.verbs()), config,
                    own);
            counters = connection.counters;
            connection.start(acceptedPeer);
            FabricOptions.beforeAccept(cmId, config);
            if (own) {
                FabricOptions.driveToRts(cmId, connection.qp, pathMtu, config);
            }
        } catch (RuntimeException | ConnectException e) {
            reject(cmId, e instanceof ProtocolException p ? p.rejectReason() : RejectReason.REASON_NO_RESOURCES);
            RdmaEvents.rejected(local, remote, e.toString());
            throw e instanceof RuntimeException r ? r : new IllegalStateException(e.getMessage(), e);
        }
        cmId.accept(connParam(pathMtu));
        FabricOptions.atRts(connection.qp, config);
    }

    /**
     * {@code rdma_connect}'s or {@code rdma_accept}'s parameters: with a queue pair of the transport's own, its
     * number and SRQ, and in the connect parameters its path MTU (a client's cap, a server's own MTU).
     */
    private ConnParam connParam(int pathMtu) {
        byte[] params = new byte[ConnectParameters.LENGTH];
        MemorySegment segment = MemorySegment.ofArray(params);
        connection.writeConnectParameters(segment);
        QueuePair qp = connection.qp;
        if (qp.cmDriven()) {
            return FabricOptions.connParam(params, config);
        }
        new ConnectParameters().wrap(segment).queuePair(true, pathMtu);
        return FabricOptions.connParam(params, config).withQp(qp.qpNum(), qp.usesSrq());
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        // Bound when connecting: rdma_resolve_addr takes the source address.
        this.local = (InetSocketAddress) localAddress;
    }

    @Override
    protected void doDisconnect() {
        doClose();
    }

    @Override
    protected void doClose() {
        State was = state;
        if (!isOpen()) {
            // Closed already: closeForcibly() after close(), or the close() that follows disconnect().
            return;
        }
        state = State.CLOSED;
        if (parent() != null) {
            ((RdmaServerChannel) parent()).childClosed(remote, was == State.NEW || was == State.ACCEPTING);
        }
        abandonRegistration();
        ChannelPromise promise = connectPromise;
        if (promise != null) {
            promise.tryFailure(new ClosedChannelException());
            connectPromise = null;
        }
        if (connectTimeoutFuture != null) {
            connectTimeoutFuture.cancel(false);
            connectTimeoutFuture = null;
        }
        if (fallbackTimeoutFuture != null) {
            fallbackTimeoutFuture.cancel(false);
            fallbackTimeoutFuture = null;
        }
        boolean established = was == State.ESTABLISHED || was == State.ACTIVE;
        if (established) {
            RdmaEvents.closed(local, remote, counters, peerGone);
        }
        if (tcp != null) {
            // What was moved into the socket drains first: those writes' promises completed already.
            tcp.close(LINGER_MILLIS);
            teardown(false);
            return;
        }
        if (connection != null && established && !peerGone && !connection.sendsDone()) {
            // Deliver what was posted before the close: tear down after the last send completes, which sends posted
            // unsignalled need a completion behind them for.
            state = State.LINGERING;
            connection.requestSendCompletion();
            eventLoop().schedule(() -> teardown(true), LINGER_MILLIS, TimeUnit.MILLISECONDS);
        } else {
            teardown(established);
        }
    }

    /**
     * Disconnects ({@code established}: the connection was, as a lingering one always was) and frees the queue
     * pair, its memory and the rdma_cm id. Idempotent.
     */
    private void teardown(boolean established) {
        state = State.CLOSED;
        CmId id = cmId;
        cmId = null;
        RdmaConnection c = connection;
        connection = null;
        try {
            if (c != null && !c.qp.cmDriven()) {
                // librdmacm's rdma_disconnect moves only the queue pairs it drives to ERR first
                c.qp.modifyToError();
            }
            if (id != null && established && (!peerGone || peerMayNotKnow)) {
                if (PortStates.isDown(id)) {
                    // No DREQ while the port is down (ParkedCmIds): the id sends it once the port is back.
                    if (c != null && c.qp.cmDriven()) {
                        c.qp.modifyToError();
                    }
                } else {
                    // Also when the queue pair failed on its own: the peer learns it from the DREQ, not from a
                    // retry budget it may not have (an idle peer notices nothing).
                    id.disconnect();
                }
            }
        } catch (RuntimeException e) {
            logger.debug("rdma_disconnect (or the queue pair's move to ERR) failed", e);
        } finally {
            if (c != null) {
                try {
                    c.destroyQueuePair();
                } finally {
                    c.release();
                }
            }
            RdmaIoHandler.Registration r = registration;
            if (id != null) {
                if (r != null) {
                    // Not now: the id may have an event being handled, acknowledged when the handler returns.
                    r.handler().closeConnectionIdLater(id);
                } else {
                    // Accepted but never registered: its connection request was acknowledged by the server.
                    id.close();
                }
            }
            if (r != null) {
                r.lingerDone();
            }
        }
    }

    /** Withdraws a {@code read()} not served yet (auto-read turned off). Any thread. */
    void clearReadPending() {
        if (isRegistered() && !eventLoop().inEventLoop()) {
            eventLoop().execute(() -> readPending = false);
        } else {
            readPending = false;
        }
    }

    @Override
    protected void doBeginRead() {
        if (tcp != null) {
            tcp.read();
            return;
        }
        readPending = true;
        if (connection != null && connection.hasPending()) {
            scheduleRead();
        }
    }

    @Override
    protected void doShutdownOutput() throws Exception {
        if (!isActive()) {
            throw new NotYetConnectedException();
        }
        outputShutdown = true;
        if (tcp != null) {
            tcp.shutdownOutput();
            return;
        }
        if (connection != null && !connection.shutdownOutput()) {
            shutdownPending = true;
        }
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws Exception {
        if (tcp != null) {
            tcp.write(in);
            return;
        }
        if (connection == null || !connection.started()) {
            throw new NotYetConnectedException();
        }
        connection.write(in);
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        if (msg instanceof ByteBuf || msg instanceof FileRegion) {
            return msg;
        }
        throw new UnsupportedOperationException("unsupported message type: " + msg.getClass().getName()
                + " (expected: ByteBuf, FileRegion)");
    }

    // ---------------------------------------------------------------- events from the loop

    @Override
    void onCmEvent(CmEvent event) {
        int type = event.type();
        if (tcp != null) {
            // The RDMA attempt was given up for TCP; its id is being destroyed.
            logger.debug("{}: ignoring rdma_cm event {} of the abandoned RDMA attempt", this, CmEventType.name(type));
            return;
        }
        try {
            switch (type) {
                case CmEventType.ADDR_RESOLVED -> {
                    FabricOptions.checkDevice(cmId, config);
                    PortStates.checkUp(cmId);
                    cmId.resolveRoute(config.getResolveTimeoutMillis());
                }
                case CmEventType.ROUTE_RESOLVED -> connectQueuePair();
                case CmEventType.CONNECT_RESPONSE -> connectResponse(event);
                case CmEventType.ESTABLISHED -> established(event);
                case CmEventType.REJECTED -> failRdmaConnect(rejected(event),
                        event.status() != RejectReason.CM_REJ_CONSUMER_DEFINED);
                case CmEventType.ADDR_ERROR, CmEventType.ROUTE_ERROR, CmEventType.UNREACHABLE,
                     CmEventType.CONNECT_ERROR -> {
                    String what = CmEventType.name(type) + " (status " + event.status() + ")";
                    if (state == State.ACCEPTING) {
                        // UNREACHABLE: rdma_cm's own wait for the client's RTU ran out.
                        dropAccepted(type == CmEventType.UNREACHABLE ? RefusalLog.Kind.TIMED_OUT
                                : RefusalLog.Kind.FAILED, "failed before it was established: " + what, null);
                    } else {
                        failRdmaConnect(new ConnectException("connection to " + requestedRemoteAddress + " failed: "
                                + what + PortStates.describeDown()), true);
                    }
                }
                case CmEventType.DISCONNECTED -> {
                    peerMayNotKnow = false;
                    peerGone();
                }
                case CmEventType.DEVICE_REMOVAL -> {
                    // Every channel and listener of the process on the device closes, from its own loop.
                    String cause = RdmaDevices.removed(cmId.verbs());
                    onDeviceRemoved(cmId.verbsAddress(), cause);
                }
                default -> logger.debug("{}: ignoring rdma_cm event {}", this, CmEventType.name(type));
            }
        } catch (Throwable t) {
            if (connectPromise != null) {
                // An rdma_cm call of the attempt failed (rdma_resolve_route: ENODEV, no RDMA device on the route):
                // RDMA cannot reach the peer.
                failRdmaConnect(t, t instanceof VerbsException && state == State.CONNECTING);
            } else if (state == State.ACCEPTING) {
                dropAccepted(RefusalLog.Kind.FAILED, "failed before it was established: " + t, t);
            } else {
                pipeline().fireExceptionCaught(t);
                unsafe().close(unsafe().voidPromise());
            }
        }
    }

    private void connectQueuePair() {
        boolean own = config.drivesQueuePair();
        connection = new RdmaConnection(registration, eventLoop(), cmId, RdmaDevices.of(cmId.verbs()), config, own);
        counters = connection.counters;
        cmId.connect(connParam(own ? QpAttributes.mtuEnum(config.getPathMtu()) : 0));
    }

    /**
     * A client whose queue pair is its own got the server's accept: moves the queue pair to RTS at the server's
     * path MTU and completes the handshake with {@code rdma_establish}, after which rdma_cm reports nothing more;
     * then it goes on as at ESTABLISHED.
     */
    private void connectResponse(CmEvent event) throws ConnectException {
        if (state != State.CONNECTING || acceptedPeer != null || connection == null || connection.qp.cmDriven()) {
            logger.debug("{}: ignoring rdma_cm event CONNECT_RESPONSE", this);
            return;
        }
        ConnectParameters server;
        try {
            server = ConnectParameters.parse(event.privateData());
        } catch (ProtocolException e) {
            failConnect(new ConnectException("connection to " + requestedRemoteAddress + " failed: "
                    + e.getMessage()));
            return;
        }
        FabricOptions.driveToRts(cmId, connection.qp, FabricOptions.connectPathMtu(cmId, config, server), config);
        try {
            cmId.establish();
        } catch (RuntimeException e) {
            ConnectException c = new ConnectException("connection to " + requestedRemoteAddress + " failed: "
                    + e.getMessage());
            c.initCause(e);
            throw c;
        }
        established(event);
    }

    private void established(CmEvent event) {
        if (state != State.CONNECTING && state != State.ACCEPTING) {
            logger.debug("{}: ignoring rdma_cm event ESTABLISHED", this);
            return;
        }
        if (acceptedPeer == null) {
            state = State.ESTABLISHED;
            FabricOptions.atRts(connection.qp, config);
            connectionSettings = FabricOptions.established(cmId, connection.qp);
            ConnectParameters peer;
            try {
                peer = ConnectParameters.parse(event.privateData());
            } catch (ProtocolException e) {
                failConnect(new ConnectException("connection to " + requestedRemoteAddress + " failed: "
                        + e.getMessage()));
                return;
            }
            try {
                FabricOptions.checkGidType(cmId, connectionSettings, config);
                FabricOptions.checkPathMtu(cmId, connectionSettings, peer);
            } catch (ConnectException e) {
                failConnect(e);
                return;
            }
            connection.start(peer);
            local = cmId.localAddress();
            remote = cmId.remoteAddress();
            RdmaEvents.connected(local, remote, connectionSettings, false, null);
            fulfillConnect();
            // The server may have sent before this event came: deliver what waits, answer what it asked for
            // (a ring, credits).
            readReady();
            if (isOpen() && connection != null) {
                connection.flushReceives();
            }
        } else {
            // read while still ACCEPTING: a failure drops the connection like any other before ESTABLISHED
            connectionSettings = FabricOptions.established(cmId, connection.qp);
            state = State.ACTIVE;
            RdmaEvents.accepted(local, remote, connectionSettings, false);
            ((RdmaServerChannel) parent()).handshakeDone();
            if (connectTimeoutFuture != null) {
                connectTimeoutFuture.cancel(false);
                connectTimeoutFuture = null;
            }
            ChannelPromise promise = registerPromise;
            if (promise != null) {
                // Netty completes the registration: handlerAdded (the child handler's initChannel),
                // channelRegistered, channelActive, and read() when auto-read is on.
                registerPromise = null;
                promise.setSuccess();
            } else {
                pipeline().fireChannelActive();
                readIfIsAutoRead();
            }
            readReady();
        }
    }

    private Throwable rejected(CmEvent event) {
        if (event.status() != RejectReason.CM_REJ_CONSUMER_DEFINED) {
            // the peer's CM answered, not our peer: its private data are zeros
            return new ConnectException("connection " + RejectReason.describeCmReason(event.status()) + ": "
                    + requestedRemoteAddress);
        }
        byte[] data = event.privateData();
        if (data.length >= RejectReason.LENGTH) {
            return new ConnectException(new RejectReason().wrap(MemorySegment.ofArray(data)).describe(data.length)
                    + ": " + requestedRemoteAddress);
        }
        return new ConnectException("connection refused: " + requestedRemoteAddress);
    }

    /**
     * The RDMA attempt failed with {@code cause}: falls back to TCP if the application allows it and
     * {@code eligible} (RDMA cannot reach the peer; a reject from this transport's server is not), else fails the
     * connect.
     */
    private void failRdmaConnect(Throwable cause, boolean eligible) {
        if (eligible && config.isTcpFallback() && connectPromise != null && state == State.CONNECTING) {
            fallBack(cause.getMessage());
        } else {
            failConnect(cause);
        }
    }

    /** Gives up the RDMA attempt (its id and queue pair) and connects over TCP, remembering why. */
    private void fallBack(String reason) {
        if (fallbackTimeoutFuture != null) {
            fallbackTimeoutFuture.cancel(false);
            fallbackTimeoutFuture = null;
        }
        CmId id = cmId;
        cmId = null;
        RdmaConnection c = connection;
        connection = null;
        counters = null;
        if (c != null) {
            try {
                c.destroyQueuePair();
            } finally {
                c.release();
            }
        }
        if (id != null) {
            registration.handler().closeConnectionIdLater(id);
        }
        registration.handler().tcpFallback();
        TcpFallback.remember((InetSocketAddress) requestedRemoteAddress, reason, config.getTcpFallbackMemoryMillis());
        connectTcp(reason);
    }

    private void connectTcp(String reason) {
        String unavailable = TcpFallback.tcpUnavailability();
        if (unavailable != null) {
            failConnect(new ConnectException("cannot reach " + requestedRemoteAddress + " over RDMA (" + reason
                    + ") and cannot fall back to TCP: " + unavailable));
            return;
        }
        fallbackReason = reason;
        TcpPath path = TcpPath.client(this);
        // Before the connect: it may complete at once, and its listener reads the path.
        tcp = path;
        path.connect(config, (InetSocketAddress) requestedRemoteAddress, local, f -> {
            if (connectPromise == null || !isOpen()) {
                return; // timed out, cancelled or closed meanwhile: the close closes the socket
            }
            if (f.isSuccess()) {
                local = tcp.localAddress();
                remote = tcp.remoteAddress();
                RdmaEvents.connected(local, remote, null, true, reason);
                fulfillConnect();
            } else {
                failConnect(new ConnectException("connection to " + requestedRemoteAddress
                        + " failed over RDMA (" + reason + ") and over TCP: " + f.cause().getMessage()));
            }
        });
    }

    /**
     * Why a connection to {@code remote} goes over TCP without an RDMA attempt: this loop has no RDMA, or the
     * destination failed over RDMA a moment ago ({@link TcpFallback}); null to try RDMA.
     */
    private String whyNotRdma(InetSocketAddress remote) {
        if (registration.handler().cmChannel() == null) {
            return "no RDMA on this host: " + registration.handler().withoutRdmaCause();
        }
        String remembered = TcpFallback.remembered(remote);
        return remembered == null ? null : "remembered: " + remembered;
    }

    // ---------------------------------------------------------------- the TCP path's events (TcpPath)

    void tcpRead(Object msg) {
        if (inputShutdown || !isActive()) {
            io.netty.util.ReferenceCountUtil.release(msg);
            return;
        }
        pipeline().fireChannelRead(msg);
    }

    void tcpReadComplete() {
        if (isActive()) {
            pipeline().fireChannelReadComplete();
        }
    }

    void tcpWritable() {
        ((RdmaUnsafe) unsafe()).flushNow();
    }

    void tcpInputShutdown() {
        inputShutdown = true;
        pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
    }

    void tcpInputShutdownReadComplete() {
        pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
    }

    void tcpClosedByPeer() {
        peerGone = true;
        if (connectPromise != null) {
            failConnect(new ConnectException("connection to " + requestedRemoteAddress + " was closed by the peer"));
        } else {
            unsafe().close(unsafe().voidPromise());
        }
    }

    void tcpException(Throwable cause) {
        pipeline().fireExceptionCaught(cause);
    }

    private void fulfillConnect() {
        ChannelPromise promise = connectPromise;
        connectPromise = null;
        if (fallbackTimeoutFuture != null) {
            fallbackTimeoutFuture.cancel(false);
            fallbackTimeoutFuture = null;
        }
        if (connectTimeoutFuture != null) {
            connectTimeoutFuture.cancel(false);
            connectTimeoutFuture = null;
        }
        if (promise == null) {
            return;
        }
        state = State.ACTIVE;
        boolean promiseSet = promise.trySuccess();
        pipeline().fireChannelActive();
        readIfIsAutoRead();
        if (!promiseSet) {
            unsafe().close(unsafe().voidPromise());
        }
    }

    private void failConnect(Throwable cause) {
        ChannelPromise promise = connectPromise;
        connectPromise = null;
        if (connectTimeoutFuture != null) {
            connectTimeoutFuture.cancel(false);
            connectTimeoutFuture = null;
        }
        if (promise != null) {
            promise.tryFailure(cause);
        }
        unsafe().close(unsafe().voidPromise());
    }

    private void readIfIsAutoRead() {
        if (config.isAutoRead()) {
            read();
        }
    }

    private void peerGone() {
        String portDown = isOpen() ? portDownCause() : null;
        if (portDown != null) {
            // Our port is down (its event is on its way to this loop): that, not the peer, is why the connection
            // ended; a disconnect or a flushed queue pair that gets here first must not pass for a peer that left.
            RdmaEvents.queuePairError(local, remote, IbvEventType.name(IbvEventType.PORT_ERR), portDown);
            failed(portDown);
            return;
        }
        peerGone = true;
        RdmaConnection c = connection;
        if (c != null) {
            // To ERR, whoever drives it (rdma_cm's DISCONNECTED leaves it as it is): what is still posted flushes. A
            // send (or invalidation) the device never finishes would otherwise keep the channel open after its peer
            // left, with nothing left to time out (faults on kernel rxe, docs/faults.md).
            try {
                c.qp.modifyToError();
            } catch (RuntimeException e) {
                logger.debug("{}: moving the queue pair of a peer that left to ERR failed", this, e);
            }
        }
        if (connectPromise != null) {
            failConnect(new ConnectException("connection to " + requestedRemoteAddress + " was closed by the peer"));
            return;
        }
        if (state == State.ACCEPTING) {
            // Accepted, but the client left before the connection was established: nobody has seen this channel.
            dropAccepted(RefusalLog.Kind.FAILED, "closed by the peer before it was established", null);
            return;
        }
        if (connection == null) {
            closeOnPeerGone();
        } else {
            // Close once everything that arrived before the disconnect has been read (onCompletionBatchDone).
            registration.handler().afterNextCompletions(registration);
        }
    }

    private void closeOnPeerGone() {
        if (!isOpen()) {
            teardown(true);
            return;
        }
        if (config.isAllowHalfClosure() && !inputShutdown) {
            inputShutdown = true;
            pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
            pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
        }
        unsafe().close(unsafe().voidPromise());
    }

    @Override
    void onCompletion(WorkCompletions wcs, int i) {
        RdmaConnection c = connection;
        if (c == null) {
            return;
        }
        boolean recv = WrId.kind(wcs.wrId(i)) == WrId.RECV;
        if (wcs.status(i) == IbvWcStatus.WR_FLUSH_ERR) {
            // The queue pair is in error: the peer disconnected (or an error completion came first). Not news.
            if (recv) {
                c.dropped(wcs, i);
            } else {
                c.released(wcs, i);
            }
            if (!peerGone && isOpen()) {
                peerMayNotKnow = true;
            }
            peerGone = true;
            return;
        }
        try {
            if (recv) {
                if (isOpen()) {
                    c.received(wcs, i);
                } else {
                    c.dropped(wcs, i);
                }
            } else {
                c.sent(wcs, i);
            }
        } catch (IOException | RuntimeException e) {
            if (!isOpen()) {
                // A closing connection's flushed work requests: expected.
                if (state == State.LINGERING && c.sendsDone()) {
                    teardown(true);
                }
                return;
            }
            peerGone = e instanceof IOException;
            peerMayNotKnow = peerGone;
            if (e instanceof ProtocolException) {
                RdmaEvents.protocolError(local, remote, e.getMessage());
            }
            Exception failure = e;
            if (e instanceof IOException io) {
                RdmaConnectionSettings settings = connectionSettings;
                failure = PortStates.explain(cmId, settings != null ? settings.port() : 1, io);
            }
            if (state == State.ACCEPTING) {
                // Not established yet, so no handler of the application's is there to hear it: the accept fails.
                dropAccepted(RefusalLog.Kind.FAILED, "failed before it was established: " + failure.getMessage(),
                        failure);
                return;
            }
            pipeline().fireExceptionCaught(failure);
            unsafe().close(unsafe().voidPromise());
        }
    }

    /**
     * The device put this channel's queue pair in the error state, or says it will: nothing more will arrive or be
     * acknowledged. Errors (a remote access the device refused, an invalid request, a failed queue, completion queue
     * or device) close the channel at once with the event as its cause; a queue pair that merely entered the
     * error state (LAST_WQE_REACHED, also what our own close and a peer's disconnect cause) closes as a peer that
     * left does, once what arrived before it has been read.
     */
    @Override
    void onAsyncEvent(int type) {
        if (connection == null || !isOpen() || type == IbvEventType.COMM_EST) {
            return;
        }
        String message = "queue pair " + connection.qpNum() + " failed: " + IbvEventType.describe(type);
        RdmaEvents.queuePairError(local, remote, IbvEventType.name(type), message);
        if (type == IbvEventType.QP_LAST_WQE_REACHED) {
            logger.debug("{}: {}", this, message);
            peerGone();
            return;
        }
        failed(message);
    }

    /** Why this connection's device cannot carry it now (a port down, {@link PortStates}), or {@code null}. */
    private String portDownCause() {
        RdmaConnectionSettings settings = connectionSettings;
        return connection == null ? null : PortStates.downCause(cmId, settings != null ? settings.port() : 1);
    }

    @Override
    void onPortDown(int port, String cause) {
        RdmaConnectionSettings settings = connectionSettings;
        if (connection == null || !isOpen() || settings != null && settings.port() != port) {
            return;
        }
        RdmaEvents.queuePairError(local, remote, IbvEventType.name(IbvEventType.PORT_ERR), cause);
        failed(cause);
    }

    @Override
    void onDeviceRemoved(long contextAddress, String cause) {
        CmId id = cmId;
        if (id == null || id.verbsAddress() != contextAddress) {
            return;
        }
        if (isOpen()) {
            RdmaEvents.queuePairError(local, remote, "DEVICE_REMOVAL", cause);
            failed(cause);
        }
        // Nothing in flight will complete: what the channel holds on the device goes now.
        closeNow();
    }

    @Override
    void onProgressCheck(long now, long limitNanos) {
        RdmaConnection c = connection;
        if (c == null || state != State.ACTIVE) {
            return;
        }
        if (config.isKeepAlive()) {
            keepAlive(c, now);
        }
        if (limitNanos == 0) {
            return;
        }
        long stalled = c.sendStalledNanos(now);
        if (stalled > limitNanos) {
            String cause = "no send completion for " + stalled / 1_000_000 + " ms with work requests outstanding: the"
                    + " peer stopped acknowledging them (RNR NAKs without end) or the device stopped completing them"
                    + " (retries without end: retry_cnt and rnr_retry 7 on kernel rxe); closed after"
                    + " RdmaIoHandlerConfig.sendStallTimeoutMillis (" + limitNanos / 1_000_000 + " ms)";
            RdmaEvents.queuePairError(local, remote, "SEND_STALL", cause);
            // Its queue pair is still retrying, or waiting: nothing more will come of it. The peer learns of the
            // close from the DREQ.
            peerGone = true;
            peerMayNotKnow = true;
            IOException e = new IOException(cause);
            e.setStackTrace(new StackTraceElement[0]);
            pipeline().fireExceptionCaught(e);
            unsafe().close(unsafe().voidPromise());
        }
    }

    /**
     * {@code SO_KEEPALIVE}: a connection idle for {@link RdmaChannelOption#KEEPALIVE_IDLE_MILLIS} probes its peer
     * (a zero-length RDMA WRITE). A peer that is gone fails the probe by retry exhaustion, and the channel closes
     * as for any failed send; a probe that never completes is the send-stall watchdog's.
     */
    private void keepAlive(RdmaConnection c, long now) {
        long activity = c.activity();
        if (activity != lastActivity || idleSince == 0) {
            lastActivity = activity;
            idleSince = now;
        } else if (now - idleSince >= TimeUnit.MILLISECONDS.toNanos(config.getKeepAliveIdleMillis())
                && c.probeIdle()) {
            c.counters.keepAliveProbes++;
            idleSince = now;
        }
    }

    /** The device failed the connection ({@code message}): fails the connect or closes the channel, at once. */
    private void failed(String message) {
        peerGone = true;
        peerMayNotKnow = false;
        if (state == State.ACCEPTING) {
            dropAccepted(RefusalLog.Kind.FAILED, "failed before it was established: " + message, null);
            return;
        }
        IOException cause = new IOException(message);
        cause.setStackTrace(new StackTraceElement[0]);
        if (connectPromise != null) {
            failConnect(cause);
            return;
        }
        pipeline().fireExceptionCaught(cause);
        unsafe().close(unsafe().voidPromise());
    }

    @Override
    void onCompletionBatchDone() {
        RdmaConnection c = connection;
        if (c == null) {
            return;
        }
        if (!isOpen()) {
            // A peer that disconnected has moved its queue pair to ERR: what is still in flight will never be
            // acknowledged, and nobody is left to read it. Waiting would only hold the queue pair, its slots and
            // its ring until the transport retries ran out (seconds), or LINGER_MILLIS.
            if (state == State.LINGERING) {
                if (c.sendsDone() || peerGone) {
                    teardown(true);
                } else {
                    // The queue was full when the linger began: now a completion has made room for the one asked.
                    c.requestSendCompletion();
                }
            }
            return;
        }
        if (peerGone && !asyncEventsTaken && cmId != null) {
            // A flushed work request: the queue pair is in ERR. When the device put it there (a refused remote
            // write: QP_ACCESS_ERR, IBA 11.6.3.1), it raised that event before flushing, but the loop reads the async
            // fd after the completion queue: take the device's events now, so that the channel closes with the error
            // as its cause rather than as a peer that left.
            asyncEventsTaken = true;
            registration.handler().takeAsyncEvents(cmId.verbsAddress());
            if (!isOpen() || connection != c) {
                return;
            }
        }
        if (peerGone) {
            // Its queue pair is in ERR and what landed before has been polled: every slab of the ring counts as
            // left and invalidated, so what arrived can be delivered (a slab the writer never left would hold it
            // forever, and the channel with it).
            c.peerLeft();
        }
        readReady();
        if (!isOpen() || connection == null) {
            // readReady() delivered the last bytes of a peer that is gone, and closed the channel.
            return;
        }
        if (peerGone) {
            if (state == State.ACCEPTING) {
                // Its queue pair failed before it was established: nobody has seen this channel or will read it.
                dropAccepted(RefusalLog.Kind.FAILED, "its queue pair failed before it was established", null);
            } else if (!connection.hasPending()) {
                closeOnPeerGone();
            }
            return;
        }
        if (shutdownPending && connection.shutdownOutput()) {
            shutdownPending = false;
        }
        ChannelOutboundBuffer out = unsafe().outboundBuffer();
        if (out != null && !out.isEmpty()) {
            ((RdmaUnsafe) unsafe()).flushNow();
        }
        if (isOpen() && connection != null) {
            connection.flushReceives();
            if (connection.awaitsInvalidation()) {
                registration.handler().pollAgain();
            }
        }
    }

    @Override
    boolean isLingering() {
        return state == State.LINGERING;
    }

    @Override
    void closeNow() {
        if (isOpen()) {
            unsafe().close(unsafe().voidPromise());
        }
        if (state == State.LINGERING) {
            teardown(true);
        }
    }

    /** Whether the device's async events were taken on the first flushed work request (onCompletionBatchDone). */
    private boolean asyncEventsTaken;

    private final Reader reader = new Reader();

    /** Turns delivered bytes into channelRead events, by the channel's RecvByteBufAllocator's rules. */
    private final class Reader implements RdmaConnection.Inbound {
        private RecvByteBufAllocator.Handle handle;

        @Override
        public boolean reading() {
            if (!isActive() || inputShutdown) {
                return false;
            }
            if (handle == null) {
                handle = unsafe().recvBufAllocHandle();
                handle.reset(config);
                return wantsData();
            }
            return handle.continueReading();
        }

        @Override
        public int data(long address, int length) {
            readPending = false;
            ByteBuf buf = handle.allocate(config.getAllocator());
            int n = Math.min(buf.writableBytes(), length);
            if (buf.hasMemoryAddress()) {
                MemorySegment.copy(ALL_MEMORY, address, ALL_MEMORY, buf.memoryAddress() + buf.writerIndex(), n);
                buf.writerIndex(buf.writerIndex() + n);
            } else {
                buf.writeBytes(ALL_MEMORY.asSlice(address, n).asByteBuffer());
            }
            handle.attemptedBytesRead(buf.writableBytes() + n);
            handle.lastBytesRead(n);
            handle.incMessagesRead(1);
            pipeline().fireChannelRead(buf);
            return n;
        }

        @Override
        public void buffer(ByteBuf buf) {
            readPending = false;
            int n = buf.readableBytes();
            handle.attemptedBytesRead(n);
            handle.lastBytesRead(n);
            handle.incMessagesRead(1);
            pipeline().fireChannelRead(buf);
        }

        @Override
        public void shutdown() {
            if (config.isAllowHalfClosure()) {
                inputShutdown = true;
                pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
                pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
            } else {
                unsafe().close(unsafe().voidPromise());
            }
        }

        void done(int delivered) {
            if (handle != null) {
                handle.readComplete();
                handle = null;
                if (delivered > 0) {
                    pipeline().fireChannelReadComplete();
                }
            }
        }
    }

    /** Delivers what has arrived while the channel reads, then re-posts the receives it freed. */
    private void readReady() {
        RdmaConnection c = connection;
        if (c == null || !c.hasPending()) {
            return;
        }
        int delivered = c.deliver(reader);
        reader.done(delivered);
        if (connection != null) {
            // Re-post the receives just freed and return their credit now: no completion may come to do it.
            connection.flushReceives();
        }
        if (c.deliverable() && isActive() && !inputShutdown && wantsData()) {
            // maxMessagesPerRead reached: give other channels a turn, then go on. (A ring write waiting for its
            // slab's invalidation is delivered when that completes: rescheduling would starve the poll.)
            scheduleRead();
        } else if (peerGone && !c.hasPending()) {
            // Everything the peer sent before it left has been read.
            closeOnPeerGone();
        }
    }

    /**
     * Whether to deliver what has arrived: when auto-read is on, a read() is pending, or the peer is gone. What a
     * departed peer sent is delivered without waiting for read() (one message per read as configured), then the
     * channel closes: its close is detected even by an application that does not read, as epoll does on
     * EPOLLRDHUP.
     */
    private boolean wantsData() {
        return config.isAutoRead() || readPending || peerGone;
    }

    private void scheduleRead() {
        if (!readScheduled) {
            readScheduled = true;
            eventLoop().execute(readTask);
        }
    }

    /**
     * A channel's life, one step at a time. A client is NEW until {@code connect()}, CONNECTING through
     * rdma_resolve_addr, rdma_resolve_route and rdma_connect, ESTABLISHED when rdma_cm reports it while it reads the
     * server's parameters (connected, so a close disconnects, but not active: a failure fails the connect), then
     * ACTIVE with its connect promise. An accepted channel is NEW until registered on its loop, ACCEPTING from
     * rdma_accept (its registration waits), then ACTIVE at ESTABLISHED. Closing makes any of these CLOSED, or, from
     * ESTABLISHED or ACTIVE, LINGERING first while sends posted before the close are in flight: until they complete
     * or are flushed, {@code LINGER_MILLIS} pass, or the loop shuts down. Nothing goes back.
     */
    enum State {
        NEW, CONNECTING, ACCEPTING, ESTABLISHED, ACTIVE, LINGERING, CLOSED
    }

    final class RdmaUnsafe extends AbstractRdmaUnsafe {
        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            if (promise.isDone() || !ensureOpen(promise)) {
                return;
            }
            try {
                if (state == State.CONNECTING) {
                    throw new ConnectionPendingException();
                }
                InetSocketAddress remoteInet = (InetSocketAddress) remoteAddress;
                if (remoteInet.isUnresolved()) {
                    throw new java.net.UnknownHostException(remoteInet.getHostString());
                }
                InetSocketAddress localInet = localAddress != null ? (InetSocketAddress) localAddress : local;
                if (cmId != null || tcp != null) {
                    throw new AlreadyConnectedException();
                }
                connectPromise = promise;
                state = State.CONNECTING;
                requestedRemoteAddress = remoteAddress;
                local = localInet;
                int connectTimeoutMillis = config.getConnectTimeoutMillis();
                if (connectTimeoutMillis > 0) {
                    connectTimeoutFuture = eventLoop().schedule(() -> {
                        ChannelPromise p = connectPromise;
                        if (p != null && !p.isDone() && p.tryFailure(new ConnectTimeoutException(
                                "connection timed out after " + connectTimeoutMillis + " ms: " + remoteAddress))) {
                            close(voidPromise());
                        }
                    }, connectTimeoutMillis, TimeUnit.MILLISECONDS);
                }
                String noRdma = config.isTcpFallback() ? whyNotRdma(remoteInet) : null;
                if (noRdma != null) {
                    connectTcp(noRdma);
                } else {
                    connectRdma(localInet, remoteInet);
                }
                promise.addListener((ChannelFutureListener) future -> {
                    if (future.isCancelled()) {
                        if (connectTimeoutFuture != null) {
                            connectTimeoutFuture.cancel(false);
                        }
                        connectPromise = null;
                        close(voidPromise());
                    }
                });
            } catch (Throwable t) {
                Throwable cause = annotateConnectException(t, remoteAddress);
                if (connectPromise == promise) {
                    failConnect(cause);
                } else {
                    closeIfClosed();
                    promise.tryFailure(cause);
                }
            }
        }

        /**
         * Starts the RDMA attempt: rdma_resolve_addr, then {@link #onCmEvent} takes it on. With
         * {@link RdmaChannelOption#TCP_FALLBACK}, its failure to start and its running out of time fall back to TCP.
         */
        private void connectRdma(InetSocketAddress localInet, InetSocketAddress remoteInet) throws ConnectException {
            if (registration.handler().cmChannel() == null) {
                throw new ConnectException("cannot connect to " + remoteInet + " over RDMA: no RDMA on this host ("
                        + registration.handler().withoutRdmaCause() + "); TCP_FALLBACK would connect over TCP");
            }
            try {
                cmId = registration.handler().cmChannel().createId();
                cmId.attach(this);
                FabricOptions.beforeResolve(cmId, config);
                cmId.resolveAddr(localInet, remoteInet, config.getResolveTimeoutMillis());
            } catch (RuntimeException e) {
                if (!config.isTcpFallback()) {
                    throw e;
                }
                fallBack("rdma_cm cannot reach " + remoteInet + ": " + e.getMessage());
                return;
            }
            if (config.isTcpFallback()) {
                int millis = config.getTcpFallbackTimeoutMillis();
                fallbackTimeoutFuture = eventLoop().schedule(() -> {
                    fallbackTimeoutFuture = null;
                    if (state == State.CONNECTING && connectPromise != null && tcp == null) {
                        fallBack("no RDMA connection within " + millis + " ms (TCP_FALLBACK_TIMEOUT_MILLIS)");
                    }
                }, millis, TimeUnit.MILLISECONDS);
            }
        }

        void flushNow() {
            flush0();
        }
    }
}
