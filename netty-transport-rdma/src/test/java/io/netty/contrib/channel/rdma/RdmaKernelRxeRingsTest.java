package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.DeviceAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Kernel rxe replays the memory-window work of a send queue when it retransmits (docs/faults.md, finding 1), so no
 * receive ring is offered there unless {@code io.netty.contrib.rdma.kernelRxeRings} is {@code true}; every other
 * device (the software device among them, which reports rxe's ids) offers one. Run on the software device and, in
 * the rxe guest, on the real driver: the expectation follows from the device's own attributes, read here.
 */
@Timeout(60)
class RdmaKernelRxeRingsTest {
    private static final int LARGE = 300_000;

    static {
        SoftwareRdma.use();
    }

    @Test
    void kernelRxeIsItsIdsWithTheSystemLibrary() {
        assertThat(RdmaDevices.isKernelRxe(attributes(0xFFFFFF, 0), false)).isTrue();
        assertThat(RdmaDevices.isKernelRxe(attributes(0xFFFFFF, 0), true)).as("the software device").isFalse();
        assertThat(RdmaDevices.isKernelRxe(attributes(0x02c9, 4123), false)).as("a ConnectX-6").isFalse();
        assertThat(RdmaDevices.isKernelRxe(attributes(0xFFFFFF, 1), false)).isFalse();
    }

    @Test
    void ringsAreOfferedExceptOnKernelRxeUnlessAskedFor() throws Exception {
        String before = System.getProperty(RdmaConnection.KERNEL_RXE_RINGS_PROPERTY);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        try {
            System.clearProperty(RdmaConnection.KERNEL_RXE_RINGS_PROPERTY);
            Offered plain = ringsOffered(group);
            System.setProperty(RdmaConnection.KERNEL_RXE_RINGS_PROPERTY, "true");
            Offered asked = ringsOffered(group);
            boolean rxe = RdmaDevices.isKernelRxe(attributesOf(plain.device), NativeLibraries.isSoftwareDevice());
            assertThat(plain.rings).as("rings offered by default on %s (kernel rxe: %s)", plain.device, rxe)
                    .isEqualTo(rxe ? 0 : 1);
            assertThat(asked.rings).as("rings offered on %s with %s=true", asked.device,
                    RdmaConnection.KERNEL_RXE_RINGS_PROPERTY).isEqualTo(1);
        } finally {
            if (before == null) {
                System.clearProperty(RdmaConnection.KERNEL_RXE_RINGS_PROPERTY);
            } else {
                System.setProperty(RdmaConnection.KERNEL_RXE_RINGS_PROPERTY, before);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private record Offered(String device, long rings) {
    }

    /** A client writes {@link #LARGE} bytes in one message; the rings the server's channel offered for it. */
    private static Offered ringsOffered(EventLoopGroup group) throws Exception {
        AtomicLong read = new AtomicLong();
        CompletableFuture<Void> all = new CompletableFuture<>();
        AtomicReference<RdmaChannel> child = new AtomicReference<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        child.set((RdmaChannel) ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                if (read.addAndGet(((ByteBuf) msg).readableBytes()) == 2L * LARGE) {
                                    all.complete(null);
                                }
                                ((ByteBuf) msg).release();
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            // The first large message asks for a ring (WANTS_RING); the second goes into it once it is offered.
            client.writeAndFlush(Unpooled.wrappedBuffer(new byte[LARGE])).sync();
            client.writeAndFlush(Unpooled.wrappedBuffer(new byte[LARGE])).sync();
            all.get(30, TimeUnit.SECONDS);
            RdmaChannel c = child.get();
            long rings = c.eventLoop().submit(() -> c.metric().ringsOffered()).get();
            String device = client.connectionSettings().device();
            client.close().sync();
            return new Offered(device, rings);
        } finally {
            server.close().sync();
        }
    }

    private static DeviceAttributes attributesOf(String device) {
        for (VerbsContext context : VerbsContext.cmDevices()) {
            if (context.deviceName().equals(device)) {
                return context.queryDevice();
            }
        }
        throw new AssertionError("rdma_get_devices does not list " + device);
    }

    private static DeviceAttributes attributes(int vendorId, int vendorPartId) {
        return new DeviceAttributes("0.0.0", 1, vendorId, vendorPartId, -1, 1024, 1024, 32, 1024, 4096, 1024, 1024,
                128, 128, 1024, 1024, 32, 1, 0, 1024);
    }
}
