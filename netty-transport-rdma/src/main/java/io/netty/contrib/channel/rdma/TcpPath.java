package io.netty.contrib.channel.rdma;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.EventLoop;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.epoll.EpollSocketChannelConfig;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.Future;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * The TCP path of an {@link RdmaChannel}: Netty's own {@link EpollSocketChannel}, hidden behind the RDMA channel
 * and registered on the same loop, carrying the channel's bytes when it fell back to TCP or was accepted from a
 * TCP client of a dual-stack server. The application's pipeline stays the RDMA channel's: what the socket reads
 * goes up it, what the application writes goes down into the socket channel.
 *
 * <p>A write is moved into the socket channel while that one is writable, and its promise completes then (as a TCP
 * write's completes when the kernel has the bytes, not the peer); the rest waits in the RDMA channel's outbound
 * buffer, which so turns unwritable as a socket channel's would, and moves on when the socket channel drains. A
 * close lets what was moved drain first (bounded), so no completed write is dropped.
 *
 * <p>This class alone (with {@link TcpListener}) links against netty-transport-classes-epoll, an optional
 * dependency: {@link TcpFallback#tcpUnavailability()} says whether it can be used. Loop-thread confined.
 */
final class TcpPath {
    private final RdmaChannel owner;
    private final EpollSocketChannel socket;
    private boolean closing;

    private TcpPath(RdmaChannel owner, EpollSocketChannel socket) {
        this.owner = owner;
        this.socket = socket;
        socket.pipeline().addLast(new Bridge());
    }

    /** A client's path, not connected yet: {@link #connect}. */
    static TcpPath client(RdmaChannel owner) {
        return new TcpPath(owner, new EpollSocketChannel());
    }

    /** The path of a connection a {@link TcpListener} accepted: {@link #configure}, then {@link #register}. */
    static TcpPath accepted(RdmaChannel owner, Channel acceptedSocket) {
        return new TcpPath(owner, (EpollSocketChannel) acceptedSocket);
    }

    /** Gives the socket channel the RDMA channel's options that have a TCP meaning. */
    void configure(RdmaChannelConfig config) {
        EpollSocketChannelConfig c = socket.config();
        c.setAutoRead(false);
        c.setAllocator(config.getAllocator());
        c.setRecvByteBufAllocator(config.getRecvByteBufAllocator());
        c.setWriteBufferWaterMark(config.getWriteBufferWaterMark());
        c.setMessageSizeEstimator(config.getMessageSizeEstimator());
        c.setAllowHalfClosure(config.isAllowHalfClosure());
        c.setTcpNoDelay(true);
        c.setKeepAlive(config.isKeepAlive());
        if (config.getSoLinger() >= 0) {
            c.setSoLinger(config.getSoLinger());
        }
        if (config.getTrafficClass() != 0) {
            c.setTrafficClass(config.getTrafficClass());
        }
    }

    /**
     * Why no TCP path can be made, or null if one can. Call only when the epoll classes are there
     * ({@link FdWatcher#epollClassesPresent()}): this class links against them.
     */
    static String unavailability() {
        if (io.netty.channel.epoll.Epoll.isAvailable()) {
            return null;
        }
        return "Netty's native epoll library did not load (add netty-transport-native-epoll for this platform): "
                + io.netty.channel.epoll.Epoll.unavailabilityCause();
    }

    /**
     * Connects over TCP on the RDMA channel's loop; {@code done} gets the socket channel's connect future (failed
     * if the registration failed).
     */
    void connect(RdmaChannelConfig config, InetSocketAddress remote, InetSocketAddress local,
                 ChannelFutureListener done) {
        configure(config);
        // The RDMA channel's connect timeout covers this attempt too.
        socket.config().setConnectTimeoutMillis(0);
        owner.eventLoop().register(socket).addListener((ChannelFutureListener) registered -> {
            if (!registered.isSuccess()) {
                done.operationComplete(registered);
                return;
            }
            ChannelFuture connect = local == null ? socket.connect(remote) : socket.connect(remote, local);
            connect.addListener(done);
        });
    }

    /** Registers an accepted path on {@code loop}, the channel's own. */
    ChannelFuture register(EventLoop loop) {
        return loop.register(socket);
    }

    InetSocketAddress localAddress() {
        return socket.localAddress();
    }

    InetSocketAddress remoteAddress() {
        return socket.remoteAddress();
    }

    /**
     * Moves what is flushed in {@code in} into the socket channel while it takes more, and flushes that; again while
     * the flush made room at once (its writability change came inside this flush, which cannot take it).
     */
    void write(ChannelOutboundBuffer in) {
        while (true) {
            boolean moved = false;
            Object msg;
            while ((msg = in.current()) != null && socket.isWritable()) {
                // in.remove() releases the message and completes its promise: the socket channel gets its own count.
                socket.write(ReferenceCountUtil.retain(msg), socket.voidPromise());
                in.remove();
                moved = true;
            }
            if (!moved) {
                return;
            }
            socket.flush();
        }
    }

    void read() {
        socket.read();
    }

    /** Shuts the socket's output down once what was moved into it is written (their promises completed). */
    void shutdownOutput() {
        socket.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener((ChannelFutureListener) f -> socket.shutdownOutput());
    }

    /** Closes the socket once what was moved into it is written, or after {@code lingerMillis}. */
    void close(long lingerMillis) {
        if (closing) {
            return;
        }
        closing = true;
        if (!socket.isRegistered()) {
            // Accepted and never registered, or a client whose registration failed: no loop to close it on.
            socket.unsafe().closeForcibly();
            return;
        }
        if (!socket.isActive() || socket.unsafe().outboundBuffer() == null
                || socket.unsafe().outboundBuffer().totalPendingWriteBytes() == 0) {
            socket.close();
            return;
        }
        // Queued behind every earlier write, so it completes when they are written (or failed).
        ChannelFuture drained = socket.writeAndFlush(Unpooled.EMPTY_BUFFER);
        Future<?> timeout = socket.eventLoop().schedule(() -> socket.close(), lingerMillis, TimeUnit.MILLISECONDS);
        drained.addListener((ChannelFutureListener) f -> {
            timeout.cancel(false);
            socket.close();
        });
    }

    boolean isOpen() {
        return socket.isOpen();
    }

    @Override
    public String toString() {
        return "TcpPath(" + socket + ")";
    }

    /** What the socket channel reports, handed to the RDMA channel on their common loop. */
    private final class Bridge extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            owner.tcpRead(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            owner.tcpReadComplete();
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            if (socket.isWritable()) {
                owner.tcpWritable();
            }
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt == ChannelInputShutdownEvent.INSTANCE) {
                owner.tcpInputShutdown();
            } else if (evt == ChannelInputShutdownReadComplete.INSTANCE) {
                owner.tcpInputShutdownReadComplete();
            }
            ReferenceCountUtil.release(evt);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (!closing) {
                owner.tcpClosedByPeer();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (!closing) {
                owner.tcpException(cause);
            }
        }
    }
}
