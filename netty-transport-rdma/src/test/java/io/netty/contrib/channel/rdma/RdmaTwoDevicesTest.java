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
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Two devices on one host, each with its own addresses (the software device with
 * {@code SOFTRDMA_DEVICE1_ADDRS=127.0.0.2}, the {@code two-devices} execution of the pom; elsewhere two RDMA devices
 * and {@code RDMA_TEST_ADDR2}, an address of the second): a server on each address, each connection on the device
 * that owns the address it was made to, both reachable; a port going down on one, or one removed, leaves the other
 * serving.
 */
@Timeout(60)
class RdmaTwoDevicesTest {
    static {
        SoftwareRdma.use();
    }

    private static InetAddress secondAddress() throws Exception {
        String a = System.getenv("RDMA_TEST_ADDR2");
        if (a == null && System.getenv("SOFTRDMA_DEVICE1_ADDRS") != null) {
            a = System.getenv("SOFTRDMA_DEVICE1_ADDRS").split("[, ]")[0];
        }
        int devices = VerbsContext.cmDevices().size();
        assumeTrue(a != null && devices >= 2, "one RDMA device (" + devices + "): the two-devices execution runs "
                + "this with SOFTRDMA_DEVICE1_ADDRS=127.0.0.2; elsewhere set RDMA_TEST_ADDR2 to the second's address");
        return InetAddress.getByName(a);
    }

    @Test
    void aServerOnEachDevicesAddressServesOnThatDevice() throws Exception {
        InetAddress second = secondAddress();
        boolean counted = SoftwareRdma.hasObjectCounts();
        Map<String, Long> before = counted ? SoftwareRdma.objectCounts() : null;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        try {
            List<String> devices = new ArrayList<>();
            for (InetAddress address : List.of(TestAddress.get(), second)) {
                devices.add(echoOnce(group, address));
            }
            assertThat(devices.get(0)).as("the devices of the two addresses").isNotEqualTo(devices.get(1));
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        if (counted) {
            Map<String, Long> after = SoftwareRdma.objectCounts();
            for (String kind : List.of("pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id", "cm_channel")) {
                assertThat(after.get(kind)).as("%s left after the group shut down", kind).isEqualTo(before.get(kind));
            }
        }
    }

    @Test
    void onePortDownLeavesTheOtherDeviceServing() throws Exception {
        InetAddress second = secondAddress();
        PortSwitch.assumeAvailable();
        assumeTrue(SoftwareRdma.hasObjectCounts(), "kernel rxe's port follows its netdev (RdmaPortEventsTest)");
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        String down = null;
        try {
            String secondDevice = echoOnce(group, second);
            PortSwitch.set(secondDevice, false);
            down = secondDevice;
            String first = echoOnce(group, TestAddress.get());
            assertThat(first).as("the first address's device").isNotEqualTo(secondDevice);
        } finally {
            if (down != null) {
                PortSwitch.set(down, true);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void oneDeviceRemovedLeavesTheOtherServing() throws Exception {
        InetAddress second = secondAddress();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        try {
            String secondDevice = echoOnce(group, second);
            Channel onFirst = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter()).bind(TestAddress.get(), 0).sync().channel();
            Channel onSecond = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter()).bind(second, 0).sync().channel();
            VerbsContext removed = VerbsContext.cmDevices().stream()
                    .filter(c -> c.deviceName().equals(secondDevice)).findFirst().orElseThrow();
            RdmaDevices.removed(removed);
            try {
                assertThat(onSecond.closeFuture().await(10, TimeUnit.SECONDS)).as("the listener on the removed"
                        + " device's address closed").isTrue();
                String first = echoOnce(group, TestAddress.get());
                assertThat(first).as("the first address's device").isNotEqualTo(secondDevice);
                assertThat(onFirst.isOpen()).as("the listener on the other device").isTrue();
                onFirst.close().sync();
            } finally {
                // The software device still has it: back for the other tests of this JVM.
                RdmaDeviceRemovalTest.waitFor(() -> RdmaDevices.released(removed), "the removed device released");
                RdmaDevices.addedBack(removed);
            }
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * A server on {@code address}, a client bound to it connecting there, one echo; returns the device both ends
     * were on, checked to be the same.
     */
    private static String echoOnce(EventLoopGroup group, InetAddress address) throws Exception {
        CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        accepted.complete((RdmaChannel) ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.writeAndFlush(msg);
                            }
                        });
                    }
                }).bind(address, 0).sync().channel();
        CompletableFuture<Integer> echoed = new CompletableFuture<>();
        RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        echoed.complete(((ByteBuf) msg).readableBytes());
                        ((ByteBuf) msg).release();
                    }
                }).connect((InetSocketAddress) server.localAddress(), new InetSocketAddress(address, 0)).sync()
                .channel();
        try {
            client.writeAndFlush(Unpooled.wrappedBuffer(new byte[100])).sync();
            assertThat(echoed.get(10, TimeUnit.SECONDS)).as("echoed over %s", address).isEqualTo(100);
            RdmaChannel child = accepted.get(10, TimeUnit.SECONDS);
            String device = child.connectionSettings().device();
            assertThat(client.connectionSettings().device()).as("the client bound to %s", address).isEqualTo(device);
            return device;
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }
}
