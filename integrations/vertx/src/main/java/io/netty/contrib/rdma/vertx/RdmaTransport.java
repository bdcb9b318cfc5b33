package io.netty.contrib.rdma.vertx;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.InternetProtocolFamily;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.contrib.channel.rdma.Rdma;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.util.internal.ObjectUtil;

/**
 * A Vert.x 5 transport over RDMA: event loops are {@link RdmaIoHandler} loops, TCP-style clients and servers
 * (HTTP, {@code NetServer}, {@code NetClient}) use {@link RdmaChannel} and {@link RdmaServerChannel}; datagram
 * sockets, among them those of Vert.x's DNS resolver, and domain sockets are Netty's own epoll channels on the same
 * loops ({@link EpollDatagramChannel}, {@link EpollDomainSocketChannel}, {@link EpollServerDomainSocketChannel}:
 * netty-transport-native-epoll comes with this module).
 *
 * <pre>
 * Vertx vertx = Vertx.builder().withTransport(RdmaTransport.transport()).build();
 * </pre>
 *
 * <p>Peers of TCP-style clients and servers are RDMA peers, unless {@link #withTcpFallback(boolean)} lets clients
 * reach TCP servers and {@link #withTcpListen(boolean)} lets servers answer TCP clients:
 * {@code Vertx.builder().withTransport(new RdmaTransport().withTcpFallback(true).withTcpListen(true).asTransport())}.
 */
public final class RdmaTransport implements io.vertx.core.spi.transport.Transport {
    private final RdmaIoHandlerConfig config;
    private final boolean tcpFallback;
    private final boolean tcpListen;

    /** A transport with the default, adaptive {@link RdmaIoHandlerConfig}. */
    public RdmaTransport() {
        this(new RdmaIoHandlerConfig());
    }

    /** A transport whose event loops use {@code config}. */
    public RdmaTransport(RdmaIoHandlerConfig config) {
        this(config, false, false);
    }

    private RdmaTransport(RdmaIoHandlerConfig config, boolean tcpFallback, boolean tcpListen) {
        this.config = ObjectUtil.checkNotNull(config, "config");
        this.tcpFallback = tcpFallback;
        this.tcpListen = tcpListen;
    }

    /**
     * This transport, with clients ({@code HttpClient}, {@code NetClient}) that connect over TCP when RDMA cannot
     * reach their server ({@link RdmaChannelOption#TCP_FALLBACK}).
     */
    public RdmaTransport withTcpFallback(boolean tcpFallback) {
        return new RdmaTransport(config, tcpFallback, tcpListen);
    }

    /**
     * This transport, with servers ({@code HttpServer}, {@code NetServer}) that also answer TCP clients on their
     * port ({@link RdmaChannelOption#TCP_LISTEN}).
     */
    public RdmaTransport withTcpListen(boolean tcpListen) {
        return new RdmaTransport(config, tcpFallback, tcpListen);
    }

    /** This transport as the {@link io.vertx.core.transport.Transport} that {@code VertxBuilder} takes. */
    public io.vertx.core.transport.Transport asTransport() {
        RdmaTransport implementation = this;
        return new io.vertx.core.transport.Transport() {
            @Override
            public String name() {
                return "rdma";
            }

            @Override
            public boolean available() {
                return implementation.isAvailable();
            }

            @Override
            public Throwable unavailabilityCause() {
                return implementation.unavailabilityCause();
            }

            @Override
            public io.vertx.core.spi.transport.Transport implementation() {
                return implementation;
            }
        };
    }

    /** This transport as the {@link io.vertx.core.transport.Transport} that {@code VertxBuilder} takes. */
    public static io.vertx.core.transport.Transport transport() {
        return transport(new RdmaIoHandlerConfig());
    }

    /** {@link #transport()} with event loops configured by {@code config}. */
    public static io.vertx.core.transport.Transport transport(RdmaIoHandlerConfig config) {
        return new RdmaTransport(config).asTransport();
    }

    @Override
    public boolean isAvailable() {
        return Rdma.isAvailable();
    }

    @Override
    public Throwable unavailabilityCause() {
        return Rdma.unavailabilityCause();
    }

    @Override
    public IoHandlerFactory ioHandlerFactory() {
        return RdmaIoHandler.newFactory(config);
    }

    @Override
    public boolean supportsDomainSockets() {
        return true;
    }

    @Override
    public java.net.SocketAddress convert(io.vertx.core.net.SocketAddress address) {
        return address.isDomainSocket() ? new DomainSocketAddress(address.path())
                : io.vertx.core.spi.transport.Transport.super.convert(address);
    }

    @Override
    public io.vertx.core.net.SocketAddress convert(java.net.SocketAddress address) {
        return address instanceof DomainSocketAddress domain
                ? io.vertx.core.net.SocketAddress.domainSocketAddress(domain.path())
                : io.vertx.core.spi.transport.Transport.super.convert(address);
    }

    @Override
    public DatagramChannel datagramChannel() {
        return new EpollDatagramChannel();
    }

    @SuppressWarnings("deprecation")
    @Override
    public DatagramChannel datagramChannel(InternetProtocolFamily family) {
        return new EpollDatagramChannel(family);
    }

    @Override
    public ChannelFactory<? extends Channel> channelFactory(boolean domainSocket) {
        if (domainSocket) {
            return EpollDomainSocketChannel::new;
        }
        return () -> {
            RdmaChannel channel = new RdmaChannel();
            channel.config().setTcpFallback(tcpFallback);
            return channel;
        };
    }

    @Override
    public ChannelFactory<? extends ServerChannel> serverChannelFactory(boolean domainSocket) {
        if (domainSocket) {
            return EpollServerDomainSocketChannel::new;
        }
        return () -> {
            RdmaServerChannel channel = new RdmaServerChannel();
            channel.config().setTcpListen(tcpListen);
            return channel;
        };
    }
}
