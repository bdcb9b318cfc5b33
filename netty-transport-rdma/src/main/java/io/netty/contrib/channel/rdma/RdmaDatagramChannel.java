package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.AbstractChannel;
import io.netty.channel.AddressedEnvelope;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.DatagramChannelConfig;
import io.netty.channel.socket.DatagramPacket;
import io.netty.channel.socket.InternetProtocolFamily;
import io.netty.channel.socket.SocketProtocolFamily;
import io.netty.util.UncheckedBooleanSupplier;
import io.netty.util.internal.ObjectUtil;
import io.netty.util.internal.StringUtil;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.NotYetConnectedException;

/**
 * A UDP {@link DatagramChannel} for {@link RdmaIoHandler} event loops: an ordinary kernel UDP socket (not RDMA),
 * non-blocking, driven by the readiness the loop's {@code epoll_wait} reports, on the loop thread. It exists so
 * that what frameworks create on the loop next to their RDMA channels works there, above all DNS resolvers
 * (Netty's {@code DnsNameResolver}, Vert.x's, reactor-netty's):
 *
 * <pre>
 * new DnsNameResolverBuilder(rdmaLoop).datagramChannelType(RdmaDatagramChannel.class) ...
 * </pre>
 *
 * <p>Bind, connect, disconnect, {@link DatagramPacket} reads and writes (and {@link ByteBuf} writes when
 * connected), {@code SO_RCVBUF}, {@code SO_SNDBUF}, {@code SO_REUSEADDR}, {@code SO_BROADCAST}, {@code IP_TOS},
 * {@code IP_MULTICAST_TTL}, {@code IP_MULTICAST_LOOP_DISABLED} and
 * {@code DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION}. Joining multicast groups is not supported (the futures fail
 * with {@link UnsupportedOperationException}). The default socket is IPv6 and dual-stack (IPv4 peers appear as
 * {@link java.net.Inet4Address}es); {@link SocketProtocolFamily#INET} gives an IPv4-only one.
 *
 * @deprecated {@link RdmaIoHandler} loops run Netty's own {@code io.netty.channel.epoll.EpollDatagramChannel}
 *     (netty-transport-classes-epoll and netty-transport-native-epoll on the class path), which does all of this
 *     and multicast too, and is tested by Netty's testsuite on these loops:
 *     {@code new DnsNameResolverBuilder(rdmaLoop).datagramChannelType(EpollDatagramChannel.class)}.
 */
@Deprecated
public final class RdmaDatagramChannel extends AbstractChannel implements DatagramChannel {
    private static final ChannelMetadata METADATA = new ChannelMetadata(true, 16);
    /** The largest UDP payload: what a heap buffer is staged through. */
    private static final int MAX_DATAGRAM = 65_535;

    private final UdpSocket socket;
    private final RdmaDatagramChannelConfig config;
    private IoRegistration registration;
    private int interest;
    private boolean bound;
    private boolean connected;
    private InetSocketAddress peer;
    private MemorySegment staging;

    /** An IPv6 dual-stack socket (IPv4 where the kernel has no IPv6). */
    public RdmaDatagramChannel() {
        this(openDefault());
    }

    /** A socket of {@code family}: {@link SocketProtocolFamily#INET} or {@link SocketProtocolFamily#INET6}. */
    public RdmaDatagramChannel(SocketProtocolFamily family) {
        this(open(ObjectUtil.checkNotNull(family, "family") == SocketProtocolFamily.INET6));
    }

    /** A socket of {@code family}, for callers of Netty's older {@link InternetProtocolFamily}. */
    @SuppressWarnings("deprecation")
    public RdmaDatagramChannel(InternetProtocolFamily family) {
        this(open(ObjectUtil.checkNotNull(family, "family") == InternetProtocolFamily.IPv6));
    }

    private RdmaDatagramChannel(UdpSocket socket) {
        super(null);
        this.socket = socket;
        this.config = new RdmaDatagramChannelConfig(this, socket);
    }

    private static UdpSocket openDefault() {
        try {
            return UdpSocket.openDefault();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open a UDP socket", e);
        }
    }

    private static UdpSocket open(boolean ipv6) {
        try {
            return UdpSocket.open(ipv6);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open a UDP socket", e);
        }
    }

    @Override
    public DatagramChannelConfig config() {
        return config;
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    public boolean isOpen() {
        return socket.isOpen();
    }

    @Override
    public boolean isActive() {
        return socket.isOpen() && (bound || connected || config.activeOnRegistration() && isRegistered());
    }

    @Override
    public boolean isConnected() {
        return connected;
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
        return socket.localAddress();
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return peer;
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(DatagramUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new DatagramUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        ((IoEventLoop) eventLoop()).register((DatagramUnsafe) unsafe()).addListener(f -> {
            if (f.isSuccess()) {
                registration = (IoRegistration) f.getNow();
                interest = 0;
                promise.setSuccess();
            } else {
                promise.setFailure(f.cause());
            }
        });
    }

    @Override
    protected void doDeregister() {
        IoRegistration r = registration;
        if (r != null) {
            registration = null;
            r.cancel();
        }
    }

    @Override
    protected void doBind(SocketAddress localAddress) throws Exception {
        socket.bind(checkInet(localAddress));
        bound = true;
    }

    private void doConnect(SocketAddress remoteAddress, SocketAddress localAddress) throws Exception {
        if (localAddress != null) {
            doBind(localAddress);
        }
        InetSocketAddress remote = checkInet(remoteAddress);
        socket.connect(remote);
        connected = true;
        bound = true;
        peer = socket.remoteAddress();
        if (peer == null) {
            peer = remote;
        }
    }

    @Override
    protected void doDisconnect() throws Exception {
        socket.disconnect();
        connected = false;
        peer = null;
        invalidateRemoteAddress();
    }

    @Override
    protected void doClose() {
        // Leave the loop's epoll before the fd number can be reused by another socket.
        doDeregister();
        socket.close();
        connected = false;
    }

    @Override
    protected void doBeginRead() {
        setInterest(interest | FdIoHandle.EPOLLIN);
    }

    /** {@code AUTO_READ} was turned off: stop watching for readability until the next {@code read()}. */
    void clearReadInterest() {
        if (!isRegistered()) {
            return;
        }
        if (eventLoop().inEventLoop()) {
            setInterest(interest & ~FdIoHandle.EPOLLIN);
        } else {
            eventLoop().execute(() -> {
                if (!config.isAutoRead()) {
                    setInterest(interest & ~FdIoHandle.EPOLLIN);
                }
            });
        }
    }

    private void setInterest(int events) {
        IoRegistration r = registration;
        if (events != interest && r != null && r.isValid()) {
            interest = events;
            r.submit(new FdIoHandle.FdIoOps(events));
        }
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        if (msg instanceof DatagramPacket packet) {
            checkInet(packet.recipient());
            return packet;
        }
        if (msg instanceof ByteBuf) {
            return msg;
        }
        if (msg instanceof AddressedEnvelope<?, ?> envelope && envelope.content() instanceof ByteBuf
                && (envelope.recipient() == null || envelope.recipient() instanceof InetSocketAddress)) {
            return msg;
        }
        throw new UnsupportedOperationException("unsupported message type: " + StringUtil.simpleClassName(msg)
                + " (expected DatagramPacket, ByteBuf or AddressedEnvelope<ByteBuf, InetSocketAddress>)");
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws Exception {
        int spins = config.getWriteSpinCount();
        while (true) {
            Object msg = in.current();
            if (msg == null) {
                setInterest(interest & ~FdIoHandle.EPOLLOUT);
                return;
            }
            ByteBuf data;
            InetSocketAddress recipient;
            if (msg instanceof AddressedEnvelope<?, ?> envelope) {
                data = (ByteBuf) envelope.content();
                recipient = (InetSocketAddress) envelope.recipient();
            } else {
                data = (ByteBuf) msg;
                recipient = null;
            }
            if (recipient == null && !connected) {
                in.remove(new NotYetConnectedException());
                continue;
            }
            int sent;
            try {
                sent = send(data, connected && recipient != null && recipient.equals(peer) ? null : recipient);
            } catch (IOException e) {
                // One datagram failed (unreachable port, too large, ...): fail its promise, send the rest.
                in.remove(e);
                continue;
            }
            if (sent < 0) {
                if (--spins <= 0) {
                    // The socket buffer is full: wait for the loop to report it writable.
                    setInterest(interest | FdIoHandle.EPOLLOUT);
                    return;
                }
                continue;
            }
            in.remove();
        }
    }

    private int send(ByteBuf data, InetSocketAddress recipient) throws IOException {
        int len = data.readableBytes();
        MemorySegment direct = directSegment(data, data.readerIndex(), len);
        if (direct != null) {
            return socket.send(direct, len, recipient);
        }
        MemorySegment stage = staging(len);
        ByteBuffer view = stage.asByteBuffer();
        data.getBytes(data.readerIndex(), view.limit(len));
        return socket.send(stage, len, recipient);
    }

    /** The native memory of {@code buf[index, index + len)}, or {@code null} for heap or composite buffers. */
    private static MemorySegment directSegment(ByteBuf buf, int index, int len) {
        if (buf.hasMemoryAddress()) {
            return MemorySegment.ofAddress(buf.memoryAddress() + index).reinterpret(len);
        }
        if (buf.isDirect() && buf.nioBufferCount() == 1) {
            return MemorySegment.ofBuffer(buf.nioBuffer(index, len));
        }
        return null;
    }

    private MemorySegment staging(int len) throws IOException {
        if (len > MAX_DATAGRAM) {
            // An IOException fails this datagram's write only, as the kernel's EMSGSIZE does for direct buffers.
            throw new IOException("datagram of " + len + " bytes exceeds the UDP maximum of " + MAX_DATAGRAM);
        }
        if (staging == null) {
            // Freed by the GC with the channel: a read or write racing close() must not touch freed memory.
            staging = Arena.ofAuto().allocate(MAX_DATAGRAM, 8);
        }
        return staging;
    }

    private static InetSocketAddress checkInet(SocketAddress address) {
        if (address instanceof InetSocketAddress inet) {
            return inet;
        }
        throw new IllegalArgumentException("unsupported address type: " + StringUtil.simpleClassName(address));
    }

    @Override
    public ChannelFuture joinGroup(InetAddress multicastAddress) {
        return joinGroup(multicastAddress, newPromise());
    }

    @Override
    public ChannelFuture joinGroup(InetAddress multicastAddress, ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture joinGroup(InetSocketAddress multicastAddress, NetworkInterface networkInterface) {
        return joinGroup(multicastAddress, networkInterface, newPromise());
    }

    @Override
    public ChannelFuture joinGroup(InetSocketAddress multicastAddress, NetworkInterface networkInterface,
                                   ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture joinGroup(InetAddress multicastAddress, NetworkInterface networkInterface,
                                   InetAddress source) {
        return joinGroup(multicastAddress, networkInterface, source, newPromise());
    }

    @Override
    public ChannelFuture joinGroup(InetAddress multicastAddress, NetworkInterface networkInterface,
                                   InetAddress source, ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture leaveGroup(InetAddress multicastAddress) {
        return leaveGroup(multicastAddress, newPromise());
    }

    @Override
    public ChannelFuture leaveGroup(InetAddress multicastAddress, ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture leaveGroup(InetSocketAddress multicastAddress, NetworkInterface networkInterface) {
        return leaveGroup(multicastAddress, networkInterface, newPromise());
    }

    @Override
    public ChannelFuture leaveGroup(InetSocketAddress multicastAddress, NetworkInterface networkInterface,
                                    ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture leaveGroup(InetAddress multicastAddress, NetworkInterface networkInterface,
                                    InetAddress source) {
        return leaveGroup(multicastAddress, networkInterface, source, newPromise());
    }

    @Override
    public ChannelFuture leaveGroup(InetAddress multicastAddress, NetworkInterface networkInterface,
                                    InetAddress source, ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture block(InetAddress multicastAddress, NetworkInterface networkInterface,
                               InetAddress sourceToBlock) {
        return block(multicastAddress, networkInterface, sourceToBlock, newPromise());
    }

    @Override
    public ChannelFuture block(InetAddress multicastAddress, NetworkInterface networkInterface,
                               InetAddress sourceToBlock, ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    @Override
    public ChannelFuture block(InetAddress multicastAddress, InetAddress sourceToBlock) {
        return block(multicastAddress, sourceToBlock, newPromise());
    }

    @Override
    public ChannelFuture block(InetAddress multicastAddress, InetAddress sourceToBlock, ChannelPromise promise) {
        return multicastUnsupported(promise);
    }

    private static ChannelFuture multicastUnsupported(ChannelPromise promise) {
        return promise.setFailure(new UnsupportedOperationException("RdmaDatagramChannel does not join multicast"
                + " groups; use NioDatagramChannel on an NIO event loop for multicast"));
    }

    /** The loop's view of the socket: readiness from epoll, connect done at once (UDP has no handshake). */
    final class DatagramUnsafe extends AbstractUnsafe implements FdIoHandle {
        private final UncheckedBooleanSupplier keepReading = () -> true;

        @Override
        public int fd() {
            return socket.fd();
        }

        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            if (!promise.setUncancellable() || !ensureOpen(promise)) {
                return;
            }
            boolean wasActive = isActive();
            try {
                doConnect(remoteAddress, localAddress);
            } catch (Throwable t) {
                promise.tryFailure(t);
                closeIfClosed();
                return;
            }
            promise.trySuccess();
            if (!wasActive && isActive()) {
                pipeline().fireChannelActive();
            }
        }

        @Override
        public void handle(IoRegistration registration, IoEvent ioEvent) {
            int events = ((FdIoEvent) ioEvent).events();
            if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
                readReady();
            }
            if ((events & EPOLLOUT) != 0 && isOpen()) {
                setInterest(interest & ~EPOLLOUT);
                super.flush0();
            }
        }

        @Override
        protected void flush0() {
            // While waiting for writability the loop calls flush0 when the socket can take more.
            if ((interest & EPOLLOUT) == 0) {
                super.flush0();
            }
        }

        private void readReady() {
            ChannelPipeline pipeline = pipeline();
            RecvByteBufAllocator.ExtendedHandle handle = (RecvByteBufAllocator.ExtendedHandle) recvBufAllocHandle();
            handle.reset(config);
            Throwable failure = null;
            boolean readSome = false;
            try {
                do {
                    ByteBuf buf = handle.allocate(config.getAllocator());
                    int n;
                    try {
                        n = receive(buf);
                    } catch (Throwable t) {
                        buf.release();
                        throw t;
                    }
                    if (n < 0) {
                        buf.release();
                        handle.lastBytesRead(0);
                        break;
                    }
                    handle.lastBytesRead(n);
                    handle.incMessagesRead(1);
                    readSome = true;
                    pipeline.fireChannelRead(new DatagramPacket(buf, RdmaDatagramChannel.this.localAddress(),
                            socket.sender()));
                } while (handle.continueReading(keepReading));
            } catch (Throwable t) {
                failure = t;
            }
            handle.readComplete();
            if (readSome || failure != null) {
                pipeline.fireChannelReadComplete();
            }
            if (failure != null) {
                pipeline.fireExceptionCaught(failure);
            }
            if (!config.isAutoRead() && isOpen()) {
                // Netty's read() contract: one read per request; the next read() asks again.
                setInterest(interest & ~EPOLLIN);
            }
        }

        private int receive(ByteBuf buf) throws IOException {
            int capacity = buf.writableBytes();
            recvBufAllocHandle().attemptedBytesRead(capacity);
            MemorySegment direct = directSegment(buf, buf.writerIndex(), capacity);
            int n;
            if (direct != null) {
                n = socket.receive(direct, capacity);
            } else {
                MemorySegment stage = staging(MAX_DATAGRAM);
                n = socket.receive(stage, capacity);
                if (n > 0) {
                    buf.setBytes(buf.writerIndex(), stage.asByteBuffer().limit(n));
                }
            }
            if (n > 0) {
                buf.writerIndex(buf.writerIndex() + n);
            }
            return n;
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
