package io.netty.contrib.rdma.vertx;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.InternetProtocolFamily;
import io.netty.contrib.channel.rdma.Rdma;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaDatagramChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.util.internal.ObjectUtil;

/**
 * A Vert.x 5 transport over RDMA: event loops are {@link RdmaIoHandler} loops, TCP-style clients and servers
 * (HTTP, {@code NetServer}, {@code NetClient}) use {@link RdmaChannel} and {@link RdmaServerChannel}, and datagram
 * sockets, among them those of Vert.x's DNS resolver, are kernel UDP on the same loops ({@link RdmaDatagramChannel}).
 *
 * <pre>
 * Vertx vertx = Vertx.builder().withTransport(RdmaTransport.transport()).build();
 * </pre>
 *
 * <p>Domain sockets are not supported. Peers must be RDMA peers: a server or client on this transport speaks to
 * other RDMA endpoints only.
 */
public final class RdmaTransport implements io.vertx.core.spi.transport.Transport {
    private final RdmaIoHandlerConfig config;

    /** A transport with the default, adaptive {@link RdmaIoHandlerConfig}. */
    public RdmaTransport() {
        this(new RdmaIoHandlerConfig());
    }

    /** A transport whose event loops use {@code config}. */
    public RdmaTransport(RdmaIoHandlerConfig config) {
        this.config = ObjectUtil.checkNotNull(config, "config");
    }

    /** This transport as the {@link io.vertx.core.transport.Transport} that {@code VertxBuilder} takes. */
    public static io.vertx.core.transport.Transport transport() {
        return transport(new RdmaIoHandlerConfig());
    }

    /** {@link #transport()} with event loops configured by {@code config}. */
    public static io.vertx.core.transport.Transport transport(RdmaIoHandlerConfig config) {
        RdmaTransport implementation = new RdmaTransport(config);
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
    public DatagramChannel datagramChannel() {
        return new RdmaDatagramChannel();
    }

    @SuppressWarnings("deprecation")
    @Override
    public DatagramChannel datagramChannel(InternetProtocolFamily family) {
        return new RdmaDatagramChannel(family);
    }

    @Override
    public ChannelFactory<? extends Channel> channelFactory(boolean domainSocket) {
        if (domainSocket) {
            throw new IllegalArgumentException("the RDMA transport has no domain sockets");
        }
        return RdmaChannel::new;
    }

    @Override
    public ChannelFactory<? extends ServerChannel> serverChannelFactory(boolean domainSocket) {
        if (domainSocket) {
            throw new IllegalArgumentException("the RDMA transport has no domain sockets");
        }
        return RdmaServerChannel::new;
    }
}
