package io.netty.contrib.channel.rdma;

import io.netty.channel.ChannelOption;
import io.netty.channel.socket.SocketChannelConfig;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Options have documented defaults, round-trip through {@code setOption}, and bad values fail clearly. */
class RdmaChannelOptionTest {
    static {
        SoftwareRdma.use();
    }

    private final RdmaChannel channel = new RdmaChannel();
    private final RdmaChannelConfig config = channel.config();

    @Test
    void defaults() {
        assertThat(config.getOption(RdmaChannelOption.RECEIVE_CREDITS)).isEqualTo(64);
        assertThat(config.getOption(RdmaChannelOption.RECEIVE_SLOT_SIZE)).isEqualTo(8192);
        assertThat(config.getOption(RdmaChannelOption.RING_SIZE)).isEqualTo(4 << 20);
        assertThat(config.getOption(RdmaChannelOption.RECEIVE_ZERO_COPY)).isTrue();
        assertThat(config.getOption(RdmaChannelOption.SEND_QUEUE_DEPTH)).isEqualTo(64);
        assertThat(config.getOption(RdmaChannelOption.MAX_INLINE_DATA)).isEqualTo(128);
        assertThat(config.getOption(RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS)).isEqualTo(2000);
        assertThat(config.getAllocator()).isInstanceOf(RdmaByteBufAllocator.class);
        assertThat(config.isTcpNoDelay()).isTrue();
        assertThat(config.getOption(RdmaChannelOption.ACK_TIMEOUT)).isEqualTo(-1);
        assertThat(config.getOption(RdmaChannelOption.RETRY_COUNT)).isEqualTo(7);
        assertThat(config.getOption(RdmaChannelOption.RNR_RETRY_COUNT)).isEqualTo(7);
        assertThat(config.getOption(RdmaChannelOption.MIN_RNR_TIMER)).isEqualTo(-1);
        assertThat(config.getOption(RdmaChannelOption.DEVICE)).isEmpty();
        assertThat(config.getOption(RdmaChannelOption.GID_TYPE)).isEmpty();
        assertThat(config.getOption(ChannelOption.IP_TOS)).isZero();
    }

    @Test
    void fabricOptionsRoundTripAtTheEndsOfTheirRanges() {
        for (int v : new int[] {-1, 0, 31}) {
            assertThat(config.setOption(RdmaChannelOption.ACK_TIMEOUT, v)).isTrue();
            assertThat(config.getOption(RdmaChannelOption.ACK_TIMEOUT)).isEqualTo(v);
            assertThat(config.setOption(RdmaChannelOption.MIN_RNR_TIMER, v)).isTrue();
            assertThat(config.getOption(RdmaChannelOption.MIN_RNR_TIMER)).isEqualTo(v);
        }
        for (int v : new int[] {0, 7}) {
            assertThat(config.setOption(RdmaChannelOption.RETRY_COUNT, v)).isTrue();
            assertThat(config.getRetryCount()).isEqualTo(v);
            assertThat(config.setOption(RdmaChannelOption.RNR_RETRY_COUNT, v)).isTrue();
            assertThat(config.getRnrRetryCount()).isEqualTo(v);
        }
        assertThat(config.setOption(ChannelOption.IP_TOS, 255)).isTrue();
        assertThat(config.getTrafficClass()).isEqualTo(255);
        assertThat(config.setOption(RdmaChannelOption.DEVICE, " mlx5_0 ")).isTrue();
        assertThat(config.getDevice()).isEqualTo("mlx5_0");
        assertThat(config.setOption(RdmaChannelOption.GID_TYPE, "roce V2")).isTrue();
        assertThat(config.getGidType()).as("normalised").isEqualTo("RoCE v2");
        assertThat(config.setOption(RdmaChannelOption.GID_TYPE, "")).isTrue();
        assertThat(config.getGidType()).isEmpty();
    }

    @Test
    void badFabricValuesNameTheirRange() {
        assertBad(RdmaChannelOption.ACK_TIMEOUT, 32, "0-31 (4.096 us * 2^ackTimeout, 0 = infinite)");
        assertBad(RdmaChannelOption.ACK_TIMEOUT, -2, "or -1 for rdma_cm's default");
        assertBad(RdmaChannelOption.MIN_RNR_TIMER, 32, "minRnrTimer");
        assertBad(RdmaChannelOption.MIN_RNR_TIMER, -5, "the IBA RNR timer code");
        assertBad(RdmaChannelOption.RETRY_COUNT, 8, "retryCount");
        assertBad(RdmaChannelOption.RETRY_COUNT, -1, "0-7");
        assertBad(RdmaChannelOption.RNR_RETRY_COUNT, 8, "rnrRetryCount");
        assertBad(ChannelOption.IP_TOS, -1, "trafficClass");
        assertBad(RdmaChannelOption.GID_TYPE, "RoCE v3", "[IB, RoCE v1, RoCE v2]");
        assertThatThrownBy(() -> config.setDevice(null))
                .isInstanceOf(NullPointerException.class).hasMessageContaining("device");
    }

    @Test
    void optionsRoundTrip() {
        assertThat(config.setOption(RdmaChannelOption.RECEIVE_CREDITS, 16)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.RECEIVE_SLOT_SIZE, 4096)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.RING_SIZE, 2 << 20)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.RECEIVE_ZERO_COPY, true)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.SEND_QUEUE_DEPTH, 64)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.MAX_INLINE_DATA, 0)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS, 500)).isTrue();
        assertThat(config.getReceiveCredits()).isEqualTo(16);
        assertThat(config.getReceiveSlotSize()).isEqualTo(4096);
        assertThat(config.getRingSize()).isEqualTo(2 << 20);
        assertThat(config.isReceiveZeroCopy()).isTrue();
        assertThat(config.getSendQueueDepth()).isEqualTo(64);
        assertThat(config.getMaxInlineData()).isZero();
        assertThat(config.getResolveTimeoutMillis()).isEqualTo(500);
        // SO_RCVBUF is the ring, rounded up to pages; TCP_NODELAY is accepted and always true.
        assertThat(config.setOption(ChannelOption.SO_RCVBUF, 10_000)).isTrue();
        assertThat(config.getRingSize()).isEqualTo(12_288);
        assertThat(config.setOption(ChannelOption.TCP_NODELAY, false)).isTrue();
        assertThat(config.getOption(ChannelOption.TCP_NODELAY)).isTrue();
    }

    @Test
    void badValuesAreRejectedWithTheirRange() {
        assertBad(RdmaChannelOption.RECEIVE_CREDITS, 1, "receiveCredits");
        assertBad(RdmaChannelOption.RECEIVE_CREDITS, 1 << 20, "receiveCredits");
        assertBad(RdmaChannelOption.RECEIVE_SLOT_SIZE, 16, "receiveSlotSize");
        assertBad(RdmaChannelOption.RING_SIZE, 5000, "multiple of 4096");
        assertBad(RdmaChannelOption.RING_SIZE, -4096, "ringSize");
        assertBad(RdmaChannelOption.SEND_QUEUE_DEPTH, 0, "sendQueueDepth");
        assertBad(RdmaChannelOption.MAX_INLINE_DATA, 4096, "maxInlineData");
        assertBad(RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS, 0, "resolveTimeoutMillis");
        assertBad(ChannelOption.SO_RCVBUF, -1, "receiveBufferSize");
        assertBad(ChannelOption.IP_TOS, 256, "trafficClass");
        assertThatThrownBy(() -> new RdmaIoHandlerConfig().completionQueueSize(10))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("completionQueueSize");
        assertThatThrownBy(() -> new RdmaIoHandlerConfig().spinNanos(-1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("spinNanos");
        assertThatThrownBy(() -> new RdmaIoHandlerConfig().pollBatch(0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pollBatch");
        assertThatThrownBy(() -> new RdmaServerChannel().config().setBacklog(-1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("backlog");
    }

    private <T> void assertBad(ChannelOption<T> option, T value, String named) {
        SocketChannelConfig fresh = new RdmaChannel().config();
        Object before = fresh.getOption(option);
        assertThatThrownBy(() -> fresh.setOption(option, value))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining(named)
                .hasMessageContaining(String.valueOf(value));
        assertThat(fresh.getOption(option)).as("%s unchanged", option).isEqualTo(before);
    }
}
