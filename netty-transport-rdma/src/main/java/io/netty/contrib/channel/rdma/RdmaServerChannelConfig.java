package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.ServerChannelRecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.ServerSocketChannelConfig;

import java.util.Map;

import static io.netty.channel.ChannelOption.SO_BACKLOG;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.util.internal.ObjectUtil.checkPositive;
import static io.netty.util.internal.ObjectUtil.checkPositiveOrZero;

/**
 * Configuration of an {@link RdmaServerChannel}. {@code SO_BACKLOG} is the rdma_cm listen backlog;
 * {@code SO_RCVBUF} and {@code SO_REUSEADDR} are accepted and remembered (set the accepted connections' ring
 * size with {@code childOption(RdmaChannelOption.RING_SIZE, ...)}).
 */
public final class RdmaServerChannelConfig extends DefaultChannelConfig implements ServerSocketChannelConfig {
    private volatile int backlog = 1024;
    private volatile int receiveBufferSize = RdmaChannelConfig.DEFAULT_RING_SIZE;
    private volatile boolean reuseAddress;
    private volatile int maxPendingHandshakes = 1024;
    private volatile int maxConnectionsPerAddress;
    private volatile boolean tcpListen;

    RdmaServerChannelConfig(RdmaServerChannel channel) {
        super(channel, new ServerChannelRecvByteBufAllocator());
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), SO_RCVBUF, SO_REUSEADDR, SO_BACKLOG,
                RdmaChannelOption.MAX_PENDING_HANDSHAKES, RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS,
                RdmaChannelOption.TCP_LISTEN);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        }
        if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        }
        if (option == SO_BACKLOG) {
            return (T) Integer.valueOf(getBacklog());
        }
        if (option == RdmaChannelOption.MAX_PENDING_HANDSHAKES) {
            return (T) Integer.valueOf(getMaxPendingHandshakes());
        }
        if (option == RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS) {
            return (T) Integer.valueOf(getMaxConnectionsPerAddress());
        }
        if (option == RdmaChannelOption.TCP_LISTEN) {
            return (T) Boolean.valueOf(isTcpListen());
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == SO_BACKLOG) {
            setBacklog((Integer) value);
        } else if (option == RdmaChannelOption.MAX_PENDING_HANDSHAKES) {
            setMaxPendingHandshakes((Integer) value);
        } else if (option == RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS) {
            setMaxConnectionsPerAddress((Integer) value);
        } else if (option == RdmaChannelOption.TCP_LISTEN) {
            setTcpListen((Boolean) value);
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    public boolean isTcpListen() {
        return tcpListen;
    }

    /** @see RdmaChannelOption#TCP_LISTEN; takes effect at the next bind. */
    public RdmaServerChannelConfig setTcpListen(boolean tcpListen) {
        this.tcpListen = tcpListen;
        return this;
    }

    public int getMaxPendingHandshakes() {
        return maxPendingHandshakes;
    }

    /** @see RdmaChannelOption#MAX_PENDING_HANDSHAKES */
    public RdmaServerChannelConfig setMaxPendingHandshakes(int maxPendingHandshakes) {
        this.maxPendingHandshakes = checkPositive(maxPendingHandshakes, "maxPendingHandshakes");
        return this;
    }

    public int getMaxConnectionsPerAddress() {
        return maxConnectionsPerAddress;
    }

    /** @see RdmaChannelOption#MAX_CONNECTIONS_PER_ADDRESS */
    public RdmaServerChannelConfig setMaxConnectionsPerAddress(int maxConnectionsPerAddress) {
        this.maxConnectionsPerAddress = checkPositiveOrZero(maxConnectionsPerAddress, "maxConnectionsPerAddress");
        return this;
    }

    @Override
    public int getBacklog() {
        return backlog;
    }

    @Override
    public RdmaServerChannelConfig setBacklog(int backlog) {
        this.backlog = checkPositiveOrZero(backlog, "backlog");
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RdmaServerChannelConfig setReuseAddress(boolean reuseAddress) {
        this.reuseAddress = reuseAddress;
        return this;
    }

    @Override
    public int getReceiveBufferSize() {
        return receiveBufferSize;
    }

    @Override
    public RdmaServerChannelConfig setReceiveBufferSize(int receiveBufferSize) {
        this.receiveBufferSize = checkPositiveOrZero(receiveBufferSize, "receiveBufferSize");
        return this;
    }

    @Override
    public RdmaServerChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public RdmaServerChannelConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
        super.setConnectTimeoutMillis(connectTimeoutMillis);
        return this;
    }

    @Override
    @Deprecated
    public RdmaServerChannelConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
        super.setMaxMessagesPerRead(maxMessagesPerRead);
        return this;
    }

    @Override
    public RdmaServerChannelConfig setWriteSpinCount(int writeSpinCount) {
        super.setWriteSpinCount(writeSpinCount);
        return this;
    }

    @Override
    public RdmaServerChannelConfig setAllocator(ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RdmaServerChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RdmaServerChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    public RdmaServerChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }

    @Override
    @Deprecated
    public RdmaServerChannelConfig setWriteBufferHighWaterMark(int writeBufferHighWaterMark) {
        super.setWriteBufferHighWaterMark(writeBufferHighWaterMark);
        return this;
    }

    @Override
    @Deprecated
    public RdmaServerChannelConfig setWriteBufferLowWaterMark(int writeBufferLowWaterMark) {
        super.setWriteBufferLowWaterMark(writeBufferLowWaterMark);
        return this;
    }

    @Override
    public RdmaServerChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        return this;
    }
}
