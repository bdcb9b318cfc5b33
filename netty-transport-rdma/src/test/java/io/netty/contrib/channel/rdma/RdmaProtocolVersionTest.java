package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.RejectReason;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** A peer that speaks another protocol version, or no protocol at all, is rejected with a reason it can read. */
@Timeout(60)
class RdmaProtocolVersionTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void serverRejectsAnotherVersionAndAForeignPeerWithTheReason() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter()).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();

            byte[] otherVersion = new byte[ConnectParameters.LENGTH];
            new ConnectParameters().wrap(MemorySegment.ofArray(otherVersion)).writeHeader().recvCredits(8)
                    .recvBufferSize(1024);
            otherVersion[5] = 2; // version 2 (a receive buffer set and a ring per connection), big-endian u16 at 4
            RejectReason reason = connectAndGetRejected(address, otherVersion);
            assertThat(reason.reason()).isEqualTo(RejectReason.REASON_VERSION_MISMATCH);
            assertThat(reason.version()).isEqualTo(ConnectParameters.VERSION);
            assertThat(reason.describe(RejectReason.LENGTH))
                    .isEqualTo("connection rejected: the peer speaks protocol version 5, this side speaks 5");

            RejectReason foreign = connectAndGetRejected(address, new byte[] {1, 2, 3});
            assertThat(foreign.reason()).isEqualTo(RejectReason.REASON_INVALID_PARAMETERS);

            // A receive slot of 1 GiB (the server would post sends of that size to it) is out of range.
            byte[] huge = new byte[ConnectParameters.LENGTH];
            new ConnectParameters().wrap(MemorySegment.ofArray(huge)).writeHeader().recvCredits(8)
                    .recvBufferSize(1 << 30);
            assertThat(connectAndGetRejected(address, huge).reason())
                    .isEqualTo(RejectReason.REASON_INVALID_PARAMETERS);
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** Connects with raw rdma_cm calls and {@code privateData}; returns the reject's reason. */
    private static RejectReason connectAndGetRejected(InetSocketAddress server, byte[] privateData) {
        try (CmEventChannel channel = CmEventChannel.create()) {
            CmId id = channel.createId();
            ProtectionDomain pd = null;
            CompletionQueue cq = null;
            QueuePair qp = null;
            try {
                id.resolveAddr(null, server, 2000);
                expect(channel, CmEventType.ADDR_RESOLVED);
                id.resolveRoute(2000);
                expect(channel, CmEventType.ROUTE_RESOLVED);
                pd = id.verbs().allocPd();
                cq = id.verbs().createCq(16, null, 0);
                qp = id.createQp(pd, new QpInitAttributes(cq, cq, null, 4, 4, 1, 1, 0, false));
                id.connect(ConnParam.of(privateData));
                CmEvent event = channel.getEvent();
                try {
                    assertThat(CmEventType.name(event.type())).isEqualTo(CmEventType.name(CmEventType.REJECTED));
                    byte[] data = event.privateData();
                    assertThat(data.length).isGreaterThanOrEqualTo(RejectReason.LENGTH);
                    RejectReason reason = new RejectReason().wrap(MemorySegment.ofArray(data));
                    assertThat(reason.magic()).isEqualTo(ConnectParameters.MAGIC);
                    return reason;
                } finally {
                    event.ack();
                }
            } finally {
                if (qp != null) {
                    qp.close();
                }
                if (cq != null) {
                    cq.close();
                }
                if (pd != null) {
                    pd.close();
                }
                id.close();
            }
        }
    }

    private static void expect(CmEventChannel channel, int type) {
        CmEvent event = channel.getEvent();
        try {
            assertThat(CmEventType.name(event.type())).isEqualTo(CmEventType.name(type));
        } finally {
            event.ack();
        }
    }
}
