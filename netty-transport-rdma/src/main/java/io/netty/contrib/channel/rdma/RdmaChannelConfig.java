package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.verbs.QpAttributes;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannelConfig;

import java.util.Map;

import static io.netty.channel.ChannelOption.ALLOW_HALF_CLOSURE;
import static io.netty.channel.ChannelOption.IP_TOS;
import static io.netty.channel.ChannelOption.SO_KEEPALIVE;
import static io.netty.channel.ChannelOption.SO_LINGER;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.channel.ChannelOption.SO_SNDBUF;
import static io.netty.channel.ChannelOption.TCP_NODELAY;
import static io.netty.util.internal.ObjectUtil.checkInRange;
import static io.netty.util.internal.ObjectUtil.checkNotNull;
import static io.netty.util.internal.ObjectUtil.checkPositive;
import static io.netty.util.internal.ObjectUtil.checkPositiveOrZero;

/**
 * Configuration of an {@link RdmaChannel}.
 *
 * <p>Socket options map to their RDMA counterpart where one exists: {@code SO_RCVBUF} is the receive ring size
 * ({@link RdmaChannelOption#RING_SIZE}), {@code IP_TOS} the traffic class rdma_cm gives the connection,
 * {@code SO_KEEPALIVE} makes an idle connection probe its peer ({@link RdmaChannelOption#KEEPALIVE_IDLE_MILLIS}).
 * Options without an RDMA meaning are accepted and remembered so that code written for TCP keeps working:
 * {@code TCP_NODELAY} (RDMA never delays a send; always reported true), {@code SO_SNDBUF} (the send side keeps no
 * kernel buffer; Netty's outbound buffer and {@link WriteBufferWaterMark} bound it), {@code SO_LINGER} (close
 * always delivers what was written before it) and {@code SO_REUSEADDR}.
 */
public final class RdmaChannelConfig extends DefaultChannelConfig implements SocketChannelConfig {
    static final int DEFAULT_RECEIVE_CREDITS = 64;
    /** Credits a connection starts with (or {@link RdmaChannelOption#RECEIVE_CREDITS} if fewer). */
    static final int INITIAL_RECEIVE_CREDITS = 4;
    static final int DEFAULT_RECEIVE_SLOT_SIZE = 8192;
    static final int DEFAULT_RING_SIZE = 4 << 20;
    static final int DEFAULT_SEND_QUEUE_DEPTH = 64;
    static final int DEFAULT_MAX_INLINE_DATA = 128;
    static final int DEFAULT_WRITE_COALESCE_THRESHOLD = 2048;
    static final int DEFAULT_RESOLVE_TIMEOUT_MILLIS = 2000;
    static final int DEFAULT_ESTABLISH_TIMEOUT_MILLIS = 10_000;
    static final int DEFAULT_KEEPALIVE_IDLE_MILLIS = 30_000;
    /** rdma_cm's own choice. */
    static final int DEFAULT_ACK_TIMEOUT = -1;
    static final int DEFAULT_RETRY_COUNT = 7;
    static final int DEFAULT_RNR_RETRY_COUNT = 7;
    /** rdma_cm's own choice. */
    static final int DEFAULT_MIN_RNR_TIMER = -1;
    /** rdma_cm's own choice. */
    static final int DEFAULT_SERVICE_LEVEL = -1;
    /** No cap: the path's MTU. */
    static final int DEFAULT_PATH_MTU = 0;
    /** The GID types {@link RdmaChannelOption#GID_TYPE} takes, as {@code GidEntry.typeName} spells them. */
    static final java.util.List<String> GID_TYPES = java.util.List.of("IB", "RoCE v1", "RoCE v2");

    static final int DEFAULT_TCP_FALLBACK_TIMEOUT_MILLIS = 2000;
    static final int DEFAULT_TCP_FALLBACK_MEMORY_MILLIS = 60_000;

    private volatile boolean tcpFallback;
    private volatile int tcpFallbackTimeoutMillis = DEFAULT_TCP_FALLBACK_TIMEOUT_MILLIS;
    private volatile int tcpFallbackMemoryMillis = DEFAULT_TCP_FALLBACK_MEMORY_MILLIS;
    private volatile boolean allowHalfClosure;
    private volatile int receiveCredits = DEFAULT_RECEIVE_CREDITS;
    private volatile int receiveSlotSize = DEFAULT_RECEIVE_SLOT_SIZE;
    private volatile boolean receiveZeroCopy = true;
    private volatile boolean allowPdWideRkeys;
    private volatile int ringSize = DEFAULT_RING_SIZE;
    private volatile int sendQueueDepth = DEFAULT_SEND_QUEUE_DEPTH;
    private volatile int maxInlineData = DEFAULT_MAX_INLINE_DATA;
    private volatile int writeCoalesceThreshold = DEFAULT_WRITE_COALESCE_THRESHOLD;
    private volatile int resolveTimeoutMillis = DEFAULT_RESOLVE_TIMEOUT_MILLIS;
    private volatile int establishTimeoutMillis = DEFAULT_ESTABLISH_TIMEOUT_MILLIS;
    private volatile int keepAliveIdleMillis = DEFAULT_KEEPALIVE_IDLE_MILLIS;
    private volatile int trafficClass;
    private volatile int ackTimeout = DEFAULT_ACK_TIMEOUT;
    private volatile int retryCount = DEFAULT_RETRY_COUNT;
    private volatile int rnrRetryCount = DEFAULT_RNR_RETRY_COUNT;
    private volatile int minRnrTimer = DEFAULT_MIN_RNR_TIMER;
    private volatile int serviceLevel = DEFAULT_SERVICE_LEVEL;
    private volatile int pathMtu = DEFAULT_PATH_MTU;
    private volatile String device = "";
    private volatile String gidType = "";
    private volatile int sendBufferSize = 128 * 1024;
    private volatile int soLinger = -1;
    private volatile boolean keepAlive;
    private volatile boolean reuseAddress;

    RdmaChannelConfig(RdmaChannel channel, ByteBufAllocator allocator) {
        super(channel);
        setAllocator(allocator);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        Map<ChannelOption<?>, Object> fallback = getOptions(super.getOptions(), RdmaChannelOption.TCP_FALLBACK,
                RdmaChannelOption.TCP_FALLBACK_TIMEOUT_MILLIS, RdmaChannelOption.TCP_FALLBACK_MEMORY_MILLIS);
        return getOptions(fallback, SO_RCVBUF, SO_SNDBUF, TCP_NODELAY, SO_KEEPALIVE, SO_REUSEADDR,
                SO_LINGER, IP_TOS, ALLOW_HALF_CLOSURE, RdmaChannelOption.RECEIVE_CREDITS,
                RdmaChannelOption.RECEIVE_SLOT_SIZE, RdmaChannelOption.RING_SIZE, RdmaChannelOption.RECEIVE_ZERO_COPY,
                RdmaChannelOption.ALLOW_PD_WIDE_RKEYS, RdmaChannelOption.SEND_QUEUE_DEPTH,
                RdmaChannelOption.MAX_INLINE_DATA, RdmaChannelOption.WRITE_COALESCE_THRESHOLD,
                RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS, RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS,
                RdmaChannelOption.KEEPALIVE_IDLE_MILLIS, RdmaChannelOption.ACK_TIMEOUT, RdmaChannelOption.RETRY_COUNT, RdmaChannelOption.RNR_RETRY_COUNT,
                RdmaChannelOption.MIN_RNR_TIMER, RdmaChannelOption.DEVICE, RdmaChannelOption.GID_TYPE,
                RdmaChannelOption.SERVICE_LEVEL, RdmaChannelOption.PATH_MTU);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == RdmaChannelOption.TCP_FALLBACK) {
            return (T) Boolean.valueOf(isTcpFallback());
        }
        if (option == RdmaChannelOption.TCP_FALLBACK_TIMEOUT_MILLIS) {
            return (T) Integer.valueOf(getTcpFallbackTimeoutMillis());
        }
        if (option == RdmaChannelOption.TCP_FALLBACK_MEMORY_MILLIS) {
            return (T) Integer.valueOf(getTcpFallbackMemoryMillis());
        }
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        }
        if (option == SO_SNDBUF) {
            return (T) Integer.valueOf(getSendBufferSize());
        }
        if (option == TCP_NODELAY) {
            return (T) Boolean.valueOf(isTcpNoDelay());
        }
        if (option == SO_KEEPALIVE) {
            return (T) Boolean.valueOf(isKeepAlive());
        }
        if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        }
        if (option == SO_LINGER) {
            return (T) Integer.valueOf(getSoLinger());
        }
        if (option == IP_TOS) {
            return (T) Integer.valueOf(getTrafficClass());
        }
        if (option == ALLOW_HALF_CLOSURE) {
            return (T) Boolean.valueOf(isAllowHalfClosure());
        }
        if (option == RdmaChannelOption.RECEIVE_CREDITS) {
            return (T) Integer.valueOf(getReceiveCredits());
        }
        if (option == RdmaChannelOption.RECEIVE_SLOT_SIZE) {
            return (T) Integer.valueOf(getReceiveSlotSize());
        }
        if (option == RdmaChannelOption.RECEIVE_ZERO_COPY) {
            return (T) Boolean.valueOf(isReceiveZeroCopy());
        }
        if (option == RdmaChannelOption.ALLOW_PD_WIDE_RKEYS) {
            return (T) Boolean.valueOf(isAllowPdWideRkeys());
        }
        if (option == RdmaChannelOption.RING_SIZE) {
            return (T) Integer.valueOf(getRingSize());
        }
        if (option == RdmaChannelOption.SEND_QUEUE_DEPTH) {
            return (T) Integer.valueOf(getSendQueueDepth());
        }
        if (option == RdmaChannelOption.MAX_INLINE_DATA) {
            return (T) Integer.valueOf(getMaxInlineData());
        }
        if (option == RdmaChannelOption.WRITE_COALESCE_THRESHOLD) {
            return (T) Integer.valueOf(getWriteCoalesceThreshold());
        }
        if (option == RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS) {
            return (T) Integer.valueOf(getResolveTimeoutMillis());
        }
        if (option == RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS) {
            return (T) Integer.valueOf(getEstablishTimeoutMillis());
        }
        if (option == RdmaChannelOption.KEEPALIVE_IDLE_MILLIS) {
            return (T) Integer.valueOf(getKeepAliveIdleMillis());
        }
        T fabric = getFabricOption(option);
        return fabric != null ? fabric : super.getOption(option);
    }

    @SuppressWarnings("unchecked")
    private <T> T getFabricOption(ChannelOption<T> option) {
        if (option == RdmaChannelOption.ACK_TIMEOUT) {
            return (T) Integer.valueOf(getAckTimeout());
        }
        if (option == RdmaChannelOption.RETRY_COUNT) {
            return (T) Integer.valueOf(getRetryCount());
        }
        if (option == RdmaChannelOption.RNR_RETRY_COUNT) {
            return (T) Integer.valueOf(getRnrRetryCount());
        }
        if (option == RdmaChannelOption.MIN_RNR_TIMER) {
            return (T) Integer.valueOf(getMinRnrTimer());
        }
        if (option == RdmaChannelOption.DEVICE) {
            return (T) getDevice();
        }
        if (option == RdmaChannelOption.GID_TYPE) {
            return (T) getGidType();
        }
        if (option == RdmaChannelOption.SERVICE_LEVEL) {
            return (T) Integer.valueOf(getServiceLevel());
        }
        if (option == RdmaChannelOption.PATH_MTU) {
            return (T) Integer.valueOf(getPathMtu());
        }
        return null;
    }

    private <T> boolean setFabricOption(ChannelOption<T> option, T value) {
        if (option == RdmaChannelOption.ACK_TIMEOUT) {
            setAckTimeout((Integer) value);
        } else if (option == RdmaChannelOption.RETRY_COUNT) {
            setRetryCount((Integer) value);
        } else if (option == RdmaChannelOption.RNR_RETRY_COUNT) {
            setRnrRetryCount((Integer) value);
        } else if (option == RdmaChannelOption.MIN_RNR_TIMER) {
            setMinRnrTimer((Integer) value);
        } else if (option == RdmaChannelOption.DEVICE) {
            setDevice((String) value);
        } else if (option == RdmaChannelOption.GID_TYPE) {
            setGidType((String) value);
        } else if (option == RdmaChannelOption.SERVICE_LEVEL) {
            setServiceLevel((Integer) value);
        } else if (option == RdmaChannelOption.PATH_MTU) {
            setPathMtu((Integer) value);
        } else {
            return false;
        }
        return true;
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == RdmaChannelOption.TCP_FALLBACK) {
            setTcpFallback((Boolean) value);
            return true;
        }
        if (option == RdmaChannelOption.TCP_FALLBACK_TIMEOUT_MILLIS) {
            setTcpFallbackTimeoutMillis((Integer) value);
            return true;
        }
        if (option == RdmaChannelOption.TCP_FALLBACK_MEMORY_MILLIS) {
            setTcpFallbackMemoryMillis((Integer) value);
            return true;
        }
        if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_SNDBUF) {
            setSendBufferSize((Integer) value);
        } else if (option == TCP_NODELAY) {
            setTcpNoDelay((Boolean) value);
        } else if (option == SO_KEEPALIVE) {
            setKeepAlive((Boolean) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == SO_LINGER) {
            setSoLinger((Integer) value);
        } else if (option == IP_TOS) {
            setTrafficClass((Integer) value);
        } else if (option == ALLOW_HALF_CLOSURE) {
            setAllowHalfClosure((Boolean) value);
        } else if (option == RdmaChannelOption.RECEIVE_CREDITS) {
            setReceiveCredits((Integer) value);
        } else if (option == RdmaChannelOption.RECEIVE_SLOT_SIZE) {
            setReceiveSlotSize((Integer) value);
        } else if (option == RdmaChannelOption.RECEIVE_ZERO_COPY) {
            setReceiveZeroCopy((Boolean) value);
        } else if (option == RdmaChannelOption.ALLOW_PD_WIDE_RKEYS) {
            setAllowPdWideRkeys((Boolean) value);
        } else if (option == RdmaChannelOption.RING_SIZE) {
            setRingSize((Integer) value);
        } else if (option == RdmaChannelOption.SEND_QUEUE_DEPTH) {
            setSendQueueDepth((Integer) value);
        } else if (option == RdmaChannelOption.MAX_INLINE_DATA) {
            setMaxInlineData((Integer) value);
        } else if (option == RdmaChannelOption.WRITE_COALESCE_THRESHOLD) {
            setWriteCoalesceThreshold((Integer) value);
        } else if (option == RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS) {
            setResolveTimeoutMillis((Integer) value);
        } else if (option == RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS) {
            setEstablishTimeoutMillis((Integer) value);
        } else if (option == RdmaChannelOption.KEEPALIVE_IDLE_MILLIS) {
            setKeepAliveIdleMillis((Integer) value);
        } else if (!setFabricOption(option, value)) {
            return super.setOption(option, value);
        }
        return true;
    }

    public int getAckTimeout() {
        return ackTimeout;
    }

    /** @see RdmaChannelOption#ACK_TIMEOUT */
    public RdmaChannelConfig setAckTimeout(int ackTimeout) {
        this.ackTimeout = checkCodeOrDefault(ackTimeout, 31, "ackTimeout",
                "0-31 (4.096 us * 2^ackTimeout, 0 = infinite)");
        return this;
    }

    public int getRetryCount() {
        return retryCount;
    }

    /** @see RdmaChannelOption#RETRY_COUNT */
    public RdmaChannelConfig setRetryCount(int retryCount) {
        this.retryCount = checkInRange(retryCount, 0, 7, "retryCount");
        return this;
    }

    public int getRnrRetryCount() {
        return rnrRetryCount;
    }

    /** @see RdmaChannelOption#RNR_RETRY_COUNT */
    public RdmaChannelConfig setRnrRetryCount(int rnrRetryCount) {
        this.rnrRetryCount = checkInRange(rnrRetryCount, 0, 7, "rnrRetryCount");
        return this;
    }

    public int getMinRnrTimer() {
        return minRnrTimer;
    }

    /** @see RdmaChannelOption#MIN_RNR_TIMER */
    public RdmaChannelConfig setMinRnrTimer(int minRnrTimer) {
        this.minRnrTimer = checkCodeOrDefault(minRnrTimer, 31, "minRnrTimer",
                "0-31 (the IBA RNR timer code: 1 = 0.01 ms ... 31 = 491.52 ms, 0 = 655.36 ms)");
        return this;
    }

    public int getServiceLevel() {
        return serviceLevel;
    }

    /** @see RdmaChannelOption#SERVICE_LEVEL */
    public RdmaChannelConfig setServiceLevel(int serviceLevel) {
        this.serviceLevel = checkCodeOrDefault(serviceLevel, 15, "serviceLevel", "0-15 (the address vector's SL)");
        return this;
    }

    public int getPathMtu() {
        return pathMtu;
    }

    /** @see RdmaChannelOption#PATH_MTU */
    public RdmaChannelConfig setPathMtu(int pathMtu) {
        if (pathMtu != 0 && QpAttributes.mtuEnum(pathMtu) == 0) {
            throw new IllegalArgumentException("pathMtu: " + pathMtu + " (expected: 256, 512, 1024, 2048 or 4096"
                    + " bytes, or 0 for the path's MTU)");
        }
        this.pathMtu = pathMtu;
        return this;
    }

    /** Whether the transport moves the queue pair to RTR itself: rdma_cm cannot set an SL or cap the MTU. */
    boolean drivesQueuePair() {
        return serviceLevel >= 0 || pathMtu != 0;
    }

    public String getDevice() {
        return device;
    }

    /** @see RdmaChannelOption#DEVICE */
    public RdmaChannelConfig setDevice(String device) {
        this.device = checkNotNull(device, "device").trim();
        return this;
    }

    public String getGidType() {
        return gidType;
    }

    /** @see RdmaChannelOption#GID_TYPE */
    public RdmaChannelConfig setGidType(String gidType) {
        checkNotNull(gidType, "gidType");
        String type = gidType.trim();
        for (String known : GID_TYPES) {
            if (known.equalsIgnoreCase(type)) {
                this.gidType = known;
                return this;
            }
        }
        if (!type.isEmpty()) {
            throw new IllegalArgumentException("gidType: \"" + gidType + "\" (expected: one of " + GID_TYPES
                    + ", or empty for rdma_cm's choice)");
        }
        this.gidType = "";
        return this;
    }

    private static int checkCodeOrDefault(int value, int max, String name, String meaning) {
        if (value < -1 || value > max) {
            throw new IllegalArgumentException(name + ": " + value + " (expected: " + meaning
                    + ", or -1 for rdma_cm's default)");
        }
        return value;
    }

    public int getReceiveCredits() {
        return receiveCredits;
    }

    /** @see RdmaChannelOption#RECEIVE_CREDITS */
    public RdmaChannelConfig setReceiveCredits(int receiveCredits) {
        this.receiveCredits = checkInRange(receiveCredits, ConnectParameters.MIN_RECV_CREDITS,
                ConnectParameters.MAX_RECV_CREDITS, "receiveCredits");
        return this;
    }

    /** The credits a connection starts with. */
    int getInitialReceiveCredits() {
        return Math.min(INITIAL_RECEIVE_CREDITS, receiveCredits);
    }

    public int getReceiveSlotSize() {
        return receiveSlotSize;
    }

    /** @see RdmaChannelOption#RECEIVE_SLOT_SIZE */
    public RdmaChannelConfig setReceiveSlotSize(int receiveSlotSize) {
        this.receiveSlotSize = checkInRange(receiveSlotSize, ConnectParameters.MIN_RECV_BUFFER_SIZE,
                ConnectParameters.MAX_RECV_BUFFER_SIZE, "receiveSlotSize");
        return this;
    }

    public boolean isReceiveZeroCopy() {
        return receiveZeroCopy;
    }

    /** @see RdmaChannelOption#RECEIVE_ZERO_COPY */
    public RdmaChannelConfig setReceiveZeroCopy(boolean receiveZeroCopy) {
        this.receiveZeroCopy = receiveZeroCopy;
        return this;
    }

    public boolean isAllowPdWideRkeys() {
        return allowPdWideRkeys;
    }

    /** @see RdmaChannelOption#ALLOW_PD_WIDE_RKEYS */
    public RdmaChannelConfig setAllowPdWideRkeys(boolean allowPdWideRkeys) {
        this.allowPdWideRkeys = allowPdWideRkeys;
        return this;
    }

    public int getRingSize() {
        return ringSize;
    }

    /** @see RdmaChannelOption#RING_SIZE */
    public RdmaChannelConfig setRingSize(int ringSize) {
        checkInRange(ringSize, 0, ConnectParameters.MAX_RING_SIZE, "ringSize");
        if (ringSize % 4096 != 0) {
            throw new IllegalArgumentException("ringSize: " + ringSize + " (expected: a multiple of 4096)");
        }
        this.ringSize = ringSize;
        return this;
    }

    public int getSendQueueDepth() {
        return sendQueueDepth;
    }

    /** @see RdmaChannelOption#SEND_QUEUE_DEPTH */
    public RdmaChannelConfig setSendQueueDepth(int sendQueueDepth) {
        this.sendQueueDepth = checkInRange(sendQueueDepth, 4, 16384, "sendQueueDepth");
        return this;
    }

    public int getMaxInlineData() {
        return maxInlineData;
    }

    /** @see RdmaChannelOption#MAX_INLINE_DATA */
    public RdmaChannelConfig setMaxInlineData(int maxInlineData) {
        this.maxInlineData = checkInRange(maxInlineData, 0, 1024, "maxInlineData");
        return this;
    }

    public int getWriteCoalesceThreshold() {
        return writeCoalesceThreshold;
    }

    /** @see RdmaChannelOption#WRITE_COALESCE_THRESHOLD */
    public RdmaChannelConfig setWriteCoalesceThreshold(int writeCoalesceThreshold) {
        this.writeCoalesceThreshold = checkInRange(writeCoalesceThreshold, 0, 1 << 20, "writeCoalesceThreshold");
        return this;
    }

    public boolean isTcpFallback() {
        return tcpFallback;
    }

    /** @see RdmaChannelOption#TCP_FALLBACK */
    public RdmaChannelConfig setTcpFallback(boolean tcpFallback) {
        this.tcpFallback = tcpFallback;
        return this;
    }

    public int getTcpFallbackTimeoutMillis() {
        return tcpFallbackTimeoutMillis;
    }

    /** @see RdmaChannelOption#TCP_FALLBACK_TIMEOUT_MILLIS */
    public RdmaChannelConfig setTcpFallbackTimeoutMillis(int tcpFallbackTimeoutMillis) {
        this.tcpFallbackTimeoutMillis = checkPositive(tcpFallbackTimeoutMillis, "tcpFallbackTimeoutMillis");
        return this;
    }

    public int getTcpFallbackMemoryMillis() {
        return tcpFallbackMemoryMillis;
    }

    /** @see RdmaChannelOption#TCP_FALLBACK_MEMORY_MILLIS */
    public RdmaChannelConfig setTcpFallbackMemoryMillis(int tcpFallbackMemoryMillis) {
        this.tcpFallbackMemoryMillis = checkPositiveOrZero(tcpFallbackMemoryMillis, "tcpFallbackMemoryMillis");
        return this;
    }

    public int getResolveTimeoutMillis() {
        return resolveTimeoutMillis;
    }

    /** @see RdmaChannelOption#RESOLVE_TIMEOUT_MILLIS */
    public RdmaChannelConfig setResolveTimeoutMillis(int resolveTimeoutMillis) {
        this.resolveTimeoutMillis = checkPositive(resolveTimeoutMillis, "resolveTimeoutMillis");
        return this;
    }

    public int getEstablishTimeoutMillis() {
        return establishTimeoutMillis;
    }

    /** @see RdmaChannelOption#ESTABLISH_TIMEOUT_MILLIS */
    public RdmaChannelConfig setEstablishTimeoutMillis(int establishTimeoutMillis) {
        this.establishTimeoutMillis = checkPositive(establishTimeoutMillis, "establishTimeoutMillis");
        return this;
    }

    public int getKeepAliveIdleMillis() {
        return keepAliveIdleMillis;
    }

    /** @see RdmaChannelOption#KEEPALIVE_IDLE_MILLIS */
    public RdmaChannelConfig setKeepAliveIdleMillis(int keepAliveIdleMillis) {
        this.keepAliveIdleMillis = checkPositive(keepAliveIdleMillis, "keepAliveIdleMillis");
        return this;
    }

    /** Always true: RDMA never holds a send back to coalesce it. */
    @Override
    public boolean isTcpNoDelay() {
        return true;
    }

    /** Accepted for compatibility; RDMA never delays a send. */
    @Override
    public RdmaChannelConfig setTcpNoDelay(boolean tcpNoDelay) {
        return this;
    }

    @Override
    public int getSoLinger() {
        return soLinger;
    }

    /** Accepted for compatibility: close always delivers what was written before it. */
    @Override
    public RdmaChannelConfig setSoLinger(int soLinger) {
        this.soLinger = soLinger;
        return this;
    }

    @Override
    public int getSendBufferSize() {
        return sendBufferSize;
    }

    /** Accepted for compatibility: Netty's outbound buffer and its water marks bound what waits to be sent. */
    @Override
    public RdmaChannelConfig setSendBufferSize(int sendBufferSize) {
        this.sendBufferSize = checkPositiveOrZero(sendBufferSize, "sendBufferSize");
        return this;
    }

    /** The receive ring size: what the peer may write before this side has read it. */
    @Override
    public int getReceiveBufferSize() {
        return ringSize;
    }

    /** Sets the receive ring size, rounded up to a multiple of 4096. */
    @Override
    public RdmaChannelConfig setReceiveBufferSize(int receiveBufferSize) {
        checkPositiveOrZero(receiveBufferSize, "receiveBufferSize");
        return setRingSize((int) Math.min(1 << 30, (receiveBufferSize + 4095L) & -4096L));
    }

    @Override
    public boolean isKeepAlive() {
        return keepAlive;
    }

    /**
     * Whether an idle connection probes its peer ({@link RdmaChannelOption#KEEPALIVE_IDLE_MILLIS}), so that a peer
     * gone without a disconnect is noticed although nothing is sent; off by default, as for TCP.
     */
    @Override
    public RdmaChannelConfig setKeepAlive(boolean keepAlive) {
        this.keepAlive = keepAlive;
        return this;
    }

    @Override
    public int getTrafficClass() {
        return trafficClass;
    }

    /**
     * The traffic class of a client's connection ({@code IP_TOS}, 0-255, default 0), given to rdma_cm with
     * {@code RDMA_OPTION_ID_TOS} before the route is resolved: on RoCE v2 the IP header's TOS byte (DSCP in the
     * upper six bits: DSCP 26 is 104), the GRH traffic class on RoCE v1, and the class rdma_cm's path query asks
     * the subnet manager for on InfiniBand, whose answer sets the service level. The connect request carries
     * the client's path, so an accepted connection has the client's traffic class and a server's childOption has
     * no effect. What the queue pair got: {@link RdmaChannel#connectionSettings()}.
     */
    @Override
    public RdmaChannelConfig setTrafficClass(int trafficClass) {
        this.trafficClass = checkInRange(trafficClass, 0, 255, "trafficClass");
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RdmaChannelConfig setReuseAddress(boolean reuseAddress) {
        this.reuseAddress = reuseAddress;
        return this;
    }

    @Override
    public RdmaChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public boolean isAllowHalfClosure() {
        return allowHalfClosure;
    }

    @Override
    public RdmaChannelConfig setAllowHalfClosure(boolean allowHalfClosure) {
        this.allowHalfClosure = allowHalfClosure;
        return this;
    }

    @Override
    public RdmaChannelConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
        super.setConnectTimeoutMillis(connectTimeoutMillis);
        return this;
    }

    @Override
    @Deprecated
    public RdmaChannelConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
        super.setMaxMessagesPerRead(maxMessagesPerRead);
        return this;
    }

    @Override
    public RdmaChannelConfig setWriteSpinCount(int writeSpinCount) {
        super.setWriteSpinCount(writeSpinCount);
        return this;
    }

    @Override
    public RdmaChannelConfig setAllocator(ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RdmaChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RdmaChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    /** As on Netty's NIO and epoll channels: turning auto-read off also withdraws a {@code read()} not served yet. */
    @Override
    protected void autoReadCleared() {
        ((RdmaChannel) channel).clearReadPending();
    }

    @Override
    public RdmaChannelConfig setAutoClose(boolean autoClose) {
        super.setAutoClose(autoClose);
        return this;
    }

    @Override
    public RdmaChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }

    @Override
    public RdmaChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        return this;
    }

    @Override
    @Deprecated
    public RdmaChannelConfig setWriteBufferHighWaterMark(int writeBufferHighWaterMark) {
        super.setWriteBufferHighWaterMark(writeBufferHighWaterMark);
        return this;
    }

    @Override
    @Deprecated
    public RdmaChannelConfig setWriteBufferLowWaterMark(int writeBufferLowWaterMark) {
        super.setWriteBufferLowWaterMark(writeBufferLowWaterMark);
        return this;
    }
}
