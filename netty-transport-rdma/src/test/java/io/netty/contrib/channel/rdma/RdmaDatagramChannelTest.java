package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.DatagramPacket;
import io.netty.channel.socket.SocketProtocolFamily;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.handler.codec.dns.DatagramDnsQuery;
import io.netty.handler.codec.dns.DatagramDnsQueryDecoder;
import io.netty.handler.codec.dns.DatagramDnsResponse;
import io.netty.handler.codec.dns.DatagramDnsResponseEncoder;
import io.netty.handler.codec.dns.DefaultDnsRawRecord;
import io.netty.handler.codec.dns.DnsQuestion;
import io.netty.handler.codec.dns.DnsRecordType;
import io.netty.handler.codec.dns.DnsResponseCode;
import io.netty.handler.codec.dns.DnsSection;
import io.netty.resolver.HostsFileEntriesResolver;
import io.netty.resolver.ResolvedAddressTypes;
import io.netty.resolver.dns.DnsNameResolver;
import io.netty.resolver.dns.DnsNameResolverBuilder;
import io.netty.resolver.dns.SingletonDnsServerAddressStreamProvider;
import io.netty.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link RdmaDatagramChannel} on an {@link RdmaIoHandler} loop against peers on an NIO loop: datagrams of every size
 * echoed and checked by CRC, connected use, auto-read off, options, and Netty's {@link DnsNameResolver} running on
 * the RDMA loop against a DNS responder on 127.0.0.1.
 */
@Timeout(60)
// RdmaDatagramChannel itself; RCVBUF_ALLOCATOR, DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION: what resolvers set
@SuppressWarnings("deprecation")
class RdmaDatagramChannelTest {
    private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
    static EventLoopGroup rdma;
    static EventLoopGroup nio;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
        rdma = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        nio = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    }

    @AfterAll
    static void tearDown() throws Exception {
        rdma.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        nio.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    /** An NIO UDP echo server on 127.0.0.1. */
    private static Channel nioEcho() throws InterruptedException {
        return new Bootstrap().group(nio).channel(NioDatagramChannel.class)
                .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(65536))
                .handler(new SimpleChannelInboundHandler<DatagramPacket>() {
                    @Override
                    protected void channelRead0(ChannelHandlerContext ctx, DatagramPacket packet) {
                        ctx.writeAndFlush(new DatagramPacket(packet.content().retain(), packet.sender()));
                    }
                }).bind(LOOPBACK, 0).sync().channel();
    }

    @io.netty.channel.ChannelHandler.Sharable
    private static final class Collector extends SimpleChannelInboundHandler<DatagramPacket> {
        final BlockingQueue<DatagramPacket> received = new LinkedBlockingQueue<>();
        final Set<String> readThreads = ConcurrentHashMap.newKeySet();

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, DatagramPacket packet) {
            // Delivered by the RDMA loop itself, not by a thread of its own.
            assertThat(ctx.channel().eventLoop().inEventLoop()).isTrue();
            readThreads.add(Thread.currentThread().getName());
            received.add(packet.retain());
        }

        DatagramPacket take(String what) throws InterruptedException {
            DatagramPacket p = received.poll(10, TimeUnit.SECONDS);
            assertThat(p).as("%s within 10 s", what).isNotNull();
            return p;
        }
    }

    private static long crc(ByteBuf buf) {
        CRC32 crc = new CRC32();
        crc.update(buf.nioBuffer());
        return crc.getValue();
    }

    @Test
    void echoesDatagramsOfEverySizeFromDirectAndHeapBuffers() throws Exception {
        Channel echo = nioEcho();
        Collector collector = new Collector();
        for (SocketProtocolFamily family : SocketProtocolFamily.values()) {
            if (family == SocketProtocolFamily.UNIX) {
                continue;
            }
            Channel ch = new Bootstrap().group(rdma).channelFactory(() -> new RdmaDatagramChannel(family))
                    .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(65536))
                    .handler(collector).bind(0).sync().channel();
            assertThat(ch).isInstanceOf(RdmaDatagramChannel.class);
            assertThat(ch.isActive()).isTrue();
            assertThat(((DatagramChannel) ch).localAddress().getPort()).isPositive();
            Random random = new Random(42);
            // Not 0 B: NioDatagramChannel does not send empty datagrams, so the echo would not answer.
            int[] sizes = {1, 100, 1472, 8192, 30_000, 65_000};
            for (int i = 0; i < 40; i++) {
                int size = sizes[i % sizes.length];
                byte[] bytes = new byte[size];
                random.nextBytes(bytes);
                ByteBuf payload = i % 2 == 0 ? Unpooled.wrappedBuffer(bytes)
                        : Unpooled.directBuffer(size).writeBytes(bytes);
                long expected = crc(payload);
                ch.writeAndFlush(new DatagramPacket(payload, (InetSocketAddress) echo.localAddress())).sync();
                DatagramPacket reply = collector.take("echo " + i + " of " + size + " B over " + family);
                try {
                    assertThat(reply.recipient()).isEqualTo(ch.localAddress());
                    assertThat(reply.sender()).isEqualTo(echo.localAddress());
                    assertThat(reply.content().readableBytes()).isEqualTo(size);
                    assertThat(crc(reply.content())).isEqualTo(expected);
                } finally {
                    reply.release();
                }
            }
            // Too large for UDP, from a heap and from a direct buffer: that write fails, the channel goes on.
            InetSocketAddress to = (InetSocketAddress) echo.localAddress();
            assertThat(ch.writeAndFlush(new DatagramPacket(Unpooled.wrappedBuffer(new byte[70_000]), to)).await()
                    .cause()).isInstanceOf(java.io.IOException.class);
            assertThat(ch.writeAndFlush(new DatagramPacket(Unpooled.directBuffer(70_000).writeZero(70_000), to))
                    .await().cause()).isInstanceOf(java.io.IOException.class);
            ch.writeAndFlush(new DatagramPacket(Unpooled.wrappedBuffer(new byte[] {42}), to)).sync();
            DatagramPacket after = collector.take("the echo after the failed writes");
            assertThat(after.content().readableBytes()).isEqualTo(1);
            after.release();
            assertThat(ch.isOpen()).isTrue();
            ch.close().sync();
            assertThat(ch.isOpen()).isFalse();
        }
        assertThat(collector.readThreads).hasSize(1);
        echo.close().sync();
    }

    @Test
    void connectedChannelWritesByteBufsAndReadsOnRequestOnly() throws Exception {
        Channel echo = nioEcho();
        Collector collector = new Collector();
        DatagramChannel ch = (DatagramChannel) new Bootstrap().group(rdma).channel(RdmaDatagramChannel.class)
                .option(ChannelOption.AUTO_READ, false)
                .handler(collector).connect(echo.localAddress()).sync().channel();
        assertThat(ch.isConnected()).isTrue();
        assertThat(ch.remoteAddress()).isEqualTo(echo.localAddress());
        ch.writeAndFlush(Unpooled.copiedBuffer(new byte[] {1, 2, 3})).sync();
        // Auto-read is off: the reply waits in the socket until read() asks for it.
        assertThat(collector.received.poll(300, TimeUnit.MILLISECONDS)).isNull();
        ch.read();
        DatagramPacket reply = collector.take("the reply");
        assertThat(reply.content().readableBytes()).isEqualTo(3);
        reply.release();
        ch.disconnect().sync();
        assertThat(ch.isConnected()).isFalse();
        // Not connected any more: a plain ByteBuf has nowhere to go.
        assertThat(ch.writeAndFlush(Unpooled.copiedBuffer(new byte[] {4})).await().cause())
                .isInstanceOf(java.nio.channels.NotYetConnectedException.class);
        ch.close().sync();
        echo.close().sync();
    }

    @Test
    void socketOptionsReachTheKernelSocket() throws Exception {
        DatagramChannel ch = (DatagramChannel) new Bootstrap().group(rdma).channel(RdmaDatagramChannel.class)
                .option(ChannelOption.SO_RCVBUF, 1 << 17)
                .option(ChannelOption.SO_BROADCAST, true)
                .option(ChannelOption.SO_REUSEADDR, true)
                .option(ChannelOption.DATAGRAM_CHANNEL_ACTIVE_ON_REGISTRATION, true)
                .handler(new Collector()).register().sync().channel();
        assertThat(ch.isActive()).as("active on registration, before any bind").isTrue();
        // Linux doubles SO_RCVBUF for its bookkeeping.
        assertThat(ch.config().getReceiveBufferSize()).isGreaterThanOrEqualTo(1 << 17);
        assertThat(ch.config().isBroadcast()).isTrue();
        assertThat(ch.config().isReuseAddress()).isTrue();
        assertThat(ch.joinGroup(InetAddress.getByName("239.1.2.3")).await().cause())
                .isInstanceOf(UnsupportedOperationException.class);
        ch.close().sync();
    }

    @Test
    void dnsNameResolverOnAnRdmaLoop() throws Exception {
        AtomicInteger queries = new AtomicInteger();
        Set<Class<?>> resolverChannels = ConcurrentHashMap.newKeySet();
        Channel dns = new Bootstrap().group(nio).channel(NioDatagramChannel.class)
                .handler(new io.netty.channel.ChannelInitializer<NioDatagramChannel>() {
                    @Override
                    protected void initChannel(NioDatagramChannel ch) {
                        ch.pipeline().addLast(new DatagramDnsQueryDecoder(), new DatagramDnsResponseEncoder(),
                                new SimpleChannelInboundHandler<DatagramDnsQuery>() {
                                    @Override
                                    protected void channelRead0(ChannelHandlerContext ctx, DatagramDnsQuery q) {
                                        queries.incrementAndGet();
                                        ctx.writeAndFlush(answer(q));
                                    }
                                });
                    }
                }).bind(LOOPBACK, 0).sync().channel();
        InetSocketAddress server = (InetSocketAddress) dns.localAddress();
        DnsNameResolver resolver = new DnsNameResolverBuilder(rdma.next())
                .datagramChannelFactory(() -> {
                    RdmaDatagramChannel ch = new RdmaDatagramChannel();
                    resolverChannels.add(ch.getClass());
                    return ch;
                })
                .nameServerProvider(new SingletonDnsServerAddressStreamProvider(server))
                .resolvedAddressTypes(ResolvedAddressTypes.IPV4_ONLY)
                .hostsFileEntriesResolver(HostsFileEntriesResolver.DEFAULT)
                .searchDomains(List.of())
                .queryTimeoutMillis(5000)
                .maxQueriesPerResolve(1)
                .build();
        try {
            for (int i = 1; i <= 20; i++) {
                Future<InetAddress> f = resolver.resolve("host" + i + ".rdma.test").await();
                assertThat(f.cause()).isNull();
                assertThat(f.getNow()).isInstanceOf(Inet4Address.class);
                assertThat(f.getNow().getAddress()).containsExactly(10, 0, 0, i);
            }
            Future<List<InetAddress>> all = resolver.resolveAll("host7.rdma.test").await();
            assertThat(all.getNow()).extracting(InetAddress::getHostAddress).containsExactly("10.0.0.7");
            Future<InetAddress> unknown = resolver.resolve("nowhere.invalid").await();
            assertThat(unknown.cause()).isInstanceOf(java.net.UnknownHostException.class);
        } finally {
            resolver.close();
        }
        assertThat(queries.get()).isGreaterThanOrEqualTo(21);
        assertThat(resolverChannels).containsExactly(RdmaDatagramChannel.class);
        dns.close().sync();
    }

    /** hostN.rdma.test is 10.0.0.N; anything else does not exist. */
    private static DatagramDnsResponse answer(DatagramDnsQuery query) {
        DnsQuestion question = query.recordAt(DnsSection.QUESTION);
        DatagramDnsResponse response = new DatagramDnsResponse(query.recipient(), query.sender(), query.id());
        response.setRecursionAvailable(true);
        response.addRecord(DnsSection.QUESTION, question);
        String name = question.name();
        if (question.type() == DnsRecordType.A && name.matches("host\\d+\\.rdma\\.test\\.?")) {
            int n = Integer.parseInt(name.substring(4, name.indexOf('.')));
            response.addRecord(DnsSection.ANSWER, new DefaultDnsRawRecord(question.name(), DnsRecordType.A, 60,
                    Unpooled.wrappedBuffer(new byte[] {10, 0, 0, (byte) n})));
        } else {
            response.setCode(DnsResponseCode.NXDOMAIN);
        }
        return response;
    }
}
