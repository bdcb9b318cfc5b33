package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelException;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.DatagramChannelConfig;

import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.Map;

import static io.netty.channel.ChannelOption.DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION;
import static io.netty.channel.ChannelOption.IP_MULTICAST_LOOP_DISABLED;
import static io.netty.channel.ChannelOption.IP_MULTICAST_TTL;
import static io.netty.channel.ChannelOption.IP_TOS;
import static io.netty.channel.ChannelOption.SO_BROADCAST;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.channel.ChannelOption.SO_SNDBUF;

/**
 * The options of an {@link RdmaDatagramChannel}: the socket options go straight to the kernel socket. The
 * multicast interface options are not supported (the channel does not join groups).
 */
@Deprecated // with RdmaDatagramChannel
final class RdmaDatagramChannelConfig extends DefaultChannelConfig implements DatagramChannelConfig {
    private final UdpSocket socket;
    private volatile boolean activeOnRegistration;

    RdmaDatagramChannelConfig(RdmaDatagramChannel channel, UdpSocket socket) {
        super(channel, new FixedRecvByteBufAllocator(2048));
        this.socket = socket;
    }

    boolean activeOnRegistration() {
        return activeOnRegistration;
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), SO_BROADCAST, SO_RCVBUF, SO_SNDBUF, SO_REUSEADDR,
                IP_MULTICAST_LOOP_DISABLED, IP_MULTICAST_TTL, IP_TOS, DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION);
    }

    @SuppressWarnings({"unchecked", "deprecation"})
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == SO_BROADCAST) {
            return (T) Boolean.valueOf(isBroadcast());
        }
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        }
        if (option == SO_SNDBUF) {
            return (T) Integer.valueOf(getSendBufferSize());
        }
        if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        }
        if (option == IP_MULTICAST_LOOP_DISABLED) {
            return (T) Boolean.valueOf(isLoopbackModeDisabled());
        }
        if (option == IP_MULTICAST_TTL) {
            return (T) Integer.valueOf(getTimeToLive());
        }
        if (option == IP_TOS) {
            return (T) Integer.valueOf(getTrafficClass());
        }
        if (option == DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION) {
            return (T) Boolean.valueOf(activeOnRegistration);
        }
        return super.getOption(option);
    }

    @SuppressWarnings("deprecation")
    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_BROADCAST) {
            setBroadcast((Boolean) value);
        } else if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_SNDBUF) {
            setSendBufferSize((Integer) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == IP_MULTICAST_LOOP_DISABLED) {
            setLoopbackModeDisabled((Boolean) value);
        } else if (option == IP_MULTICAST_TTL) {
            setTimeToLive((Integer) value);
        } else if (option == IP_TOS) {
            setTrafficClass((Integer) value);
        } else if (option == DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION) {
            if (channel.isRegistered()) {
                throw new IllegalStateException("DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION set after registration");
            }
            activeOnRegistration = (Boolean) value;
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    private int get(int level, int option) {
        try {
            return socket.getInt(level, option);
        } catch (IOException e) {
            throw new ChannelException(e);
        }
    }

    private void set(int level, int option, int value) {
        try {
            socket.setInt(level, option, value);
        } catch (IOException e) {
            throw new ChannelException(e);
        }
    }

    @Override
    public int getSendBufferSize() {
        return get(UdpSocket.SOL_SOCKET, UdpSocket.SO_SNDBUF);
    }

    @Override
    public RdmaDatagramChannelConfig setSendBufferSize(int sendBufferSize) {
        set(UdpSocket.SOL_SOCKET, UdpSocket.SO_SNDBUF, sendBufferSize);
        return this;
    }

    @Override
    public int getReceiveBufferSize() {
        return get(UdpSocket.SOL_SOCKET, UdpSocket.SO_RCVBUF);
    }

    @Override
    public RdmaDatagramChannelConfig setReceiveBufferSize(int receiveBufferSize) {
        set(UdpSocket.SOL_SOCKET, UdpSocket.SO_RCVBUF, receiveBufferSize);
        return this;
    }

    @Override
    public int getTrafficClass() {
        return socket.ipv6() ? get(UdpSocket.IPPROTO_IPV6, UdpSocket.IPV6_TCLASS)
                : get(UdpSocket.IPPROTO_IP, UdpSocket.IP_TOS);
    }

    @Override
    public RdmaDatagramChannelConfig setTrafficClass(int trafficClass) {
        if (socket.ipv6()) {
            set(UdpSocket.IPPROTO_IPV6, UdpSocket.IPV6_TCLASS, trafficClass);
            // IPv4 peers of a dual-stack socket are reached with the IPv4 option.
            try {
                socket.setInt(UdpSocket.IPPROTO_IP, UdpSocket.IP_TOS, trafficClass);
            } catch (IOException ignored) {
                // not every kernel takes IPv4 options on an IPv6 socket
            }
        } else {
            set(UdpSocket.IPPROTO_IP, UdpSocket.IP_TOS, trafficClass);
        }
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return get(UdpSocket.SOL_SOCKET, UdpSocket.SO_REUSEADDR) != 0;
    }

    @Override
    public RdmaDatagramChannelConfig setReuseAddress(boolean reuseAddress) {
        set(UdpSocket.SOL_SOCKET, UdpSocket.SO_REUSEADDR, reuseAddress ? 1 : 0);
        return this;
    }

    @Override
    public boolean isBroadcast() {
        return get(UdpSocket.SOL_SOCKET, UdpSocket.SO_BROADCAST) != 0;
    }

    @Override
    public RdmaDatagramChannelConfig setBroadcast(boolean broadcast) {
        set(UdpSocket.SOL_SOCKET, UdpSocket.SO_BROADCAST, broadcast ? 1 : 0);
        return this;
    }

    @Override
    public boolean isLoopbackModeDisabled() {
        return (socket.ipv6() ? get(UdpSocket.IPPROTO_IPV6, UdpSocket.IPV6_MULTICAST_LOOP)
                : get(UdpSocket.IPPROTO_IP, UdpSocket.IP_MULTICAST_LOOP)) == 0;
    }

    @Override
    public RdmaDatagramChannelConfig setLoopbackModeDisabled(boolean loopbackModeDisabled) {
        int loop = loopbackModeDisabled ? 0 : 1;
        if (socket.ipv6()) {
            set(UdpSocket.IPPROTO_IPV6, UdpSocket.IPV6_MULTICAST_LOOP, loop);
        } else {
            set(UdpSocket.IPPROTO_IP, UdpSocket.IP_MULTICAST_LOOP, loop);
        }
        return this;
    }

    @Override
    public int getTimeToLive() {
        return socket.ipv6() ? get(UdpSocket.IPPROTO_IPV6, UdpSocket.IPV6_MULTICAST_HOPS)
                : get(UdpSocket.IPPROTO_IP, UdpSocket.IP_MULTICAST_TTL);
    }

    @Override
    public RdmaDatagramChannelConfig setTimeToLive(int ttl) {
        if (socket.ipv6()) {
            set(UdpSocket.IPPROTO_IPV6, UdpSocket.IPV6_MULTICAST_HOPS, ttl);
        } else {
            set(UdpSocket.IPPROTO_IP, UdpSocket.IP_MULTICAST_TTL, ttl);
        }
        return this;
    }

    @Override
    public InetAddress getInterface() {
        return null;
    }

    @Override
    public RdmaDatagramChannelConfig setInterface(InetAddress interfaceAddress) {
        throw new UnsupportedOperationException("RdmaDatagramChannel does not support multicast interfaces");
    }

    @Override
    public NetworkInterface getNetworkInterface() {
        return null;
    }

    @Override
    public RdmaDatagramChannelConfig setNetworkInterface(NetworkInterface networkInterface) {
        throw new UnsupportedOperationException("RdmaDatagramChannel does not support multicast interfaces");
    }

    @Override
    @Deprecated
    public RdmaDatagramChannelConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
        super.setMaxMessagesPerRead(maxMessagesPerRead);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setWriteSpinCount(int writeSpinCount) {
        super.setWriteSpinCount(writeSpinCount);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
        super.setConnectTimeoutMillis(connectTimeoutMillis);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setAllocator(ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setAutoClose(boolean autoClose) {
        super.setAutoClose(autoClose);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }

    @Override
    public RdmaDatagramChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        return this;
    }

    @Override
    protected void autoReadCleared() {
        ((RdmaDatagramChannel) channel).clearReadInterest();
    }
}
