package io.netty.contrib.rdma.vertx;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
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

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** A DNS responder on 127.0.0.1 (UDP, NIO loop): A records for the names it is given, NXDOMAIN for the rest. */
final class TestDnsServer implements AutoCloseable {
    private final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    private final Channel channel;
    final AtomicInteger queries = new AtomicInteger();

    TestDnsServer(Map<String, InetAddress> records) throws InterruptedException {
        channel = new Bootstrap().group(group).channel(NioDatagramChannel.class)
                .handler(new ChannelInitializer<NioDatagramChannel>() {
                    @Override
                    protected void initChannel(NioDatagramChannel ch) {
                        ch.pipeline().addLast(new DatagramDnsQueryDecoder(), new DatagramDnsResponseEncoder(),
                                new SimpleChannelInboundHandler<DatagramDnsQuery>() {
                                    @Override
                                    protected void channelRead0(ChannelHandlerContext ctx, DatagramDnsQuery q) {
                                        queries.incrementAndGet();
                                        ctx.writeAndFlush(answer(q, records));
                                    }
                                });
                    }
                }).bind(InetAddress.getLoopbackAddress(), 0).sync().channel();
    }

    InetSocketAddress address() {
        return (InetSocketAddress) channel.localAddress();
    }

    private static DatagramDnsResponse answer(DatagramDnsQuery query, Map<String, InetAddress> records) {
        DnsQuestion question = query.recordAt(DnsSection.QUESTION);
        DatagramDnsResponse response = new DatagramDnsResponse(query.recipient(), query.sender(), query.id());
        response.setRecursionAvailable(true);
        response.addRecord(DnsSection.QUESTION, question);
        String name = question.name().endsWith(".") ? question.name().substring(0, question.name().length() - 1)
                : question.name();
        InetAddress address = records.get(name);
        if (address == null) {
            response.setCode(DnsResponseCode.NXDOMAIN);
        } else if (question.type() == DnsRecordType.A && address.getAddress().length == 4) {
            response.addRecord(DnsSection.ANSWER, new DefaultDnsRawRecord(question.name(), DnsRecordType.A, 60,
                    Unpooled.wrappedBuffer(address.getAddress())));
        }
        return response;
    }

    @Override
    public void close() throws InterruptedException {
        channel.close().sync();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
    }
}
