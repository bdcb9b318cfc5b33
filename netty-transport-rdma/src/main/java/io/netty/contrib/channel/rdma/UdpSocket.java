package io.netty.contrib.channel.rdma;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.PortUnreachableException;
import java.net.UnknownHostException;
import java.nio.ByteOrder;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A non-blocking kernel UDP socket (libc through FFM) for {@link RdmaDatagramChannel}. Loop-thread confined
 * after construction. An IPv6 socket is dual-stack: IPv4 addresses travel as IPv4-mapped IPv6 addresses and are
 * reported back as {@link Inet4Address}es.
 */
@Deprecated // with RdmaDatagramChannel
final class UdpSocket {
    static final int AF_INET = 2;
    static final int AF_INET6 = 10;
    static final int SOL_SOCKET = 1;
    static final int SO_REUSEADDR = 2;
    static final int SO_BROADCAST = 6;
    static final int SO_SNDBUF = 7;
    static final int SO_RCVBUF = 8;
    static final int SO_REUSEPORT = 15;
    static final int IPPROTO_IP = 0;
    static final int IP_TOS = 1;
    static final int IP_MULTICAST_TTL = 33;
    static final int IP_MULTICAST_LOOP = 34;
    static final int IPPROTO_IPV6 = 41;
    static final int IPV6_MULTICAST_HOPS = 18;
    static final int IPV6_MULTICAST_LOOP = 19;
    static final int IPV6_V6ONLY = 26;
    static final int IPV6_TCLASS = 67;
    private static final int SOCK_DGRAM = 2;
    private static final int SOCK_NONBLOCK = 0x800;
    private static final int SOCK_CLOEXEC = 0x80000;
    private static final int AF_UNSPEC = 0;
    private static final int EAGAIN = 11;
    private static final int EINTR = 4;
    private static final int ECONNREFUSED = 111;
    /** {@code sizeof(struct sockaddr_in6)}, the larger of the two families. */
    private static final int SOCKADDR_SIZE = 28;

    private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final MethodHandle SOCKET;
    private static final MethodHandle BIND;
    private static final MethodHandle CONNECT;
    private static final MethodHandle GETSOCKNAME;
    private static final MethodHandle GETPEERNAME;
    private static final MethodHandle SENDTO;
    private static final MethodHandle RECVFROM;
    private static final MethodHandle SETSOCKOPT;
    private static final MethodHandle GETSOCKOPT;
    private static final MethodHandle CLOSE;

    static {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        SOCKET = linker.downcallHandle(libc.findOrThrow("socket"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), errno);
        FunctionDescriptor addressCall = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT);
        BIND = linker.downcallHandle(libc.findOrThrow("bind"), addressCall, errno);
        CONNECT = linker.downcallHandle(libc.findOrThrow("connect"), addressCall, errno);
        FunctionDescriptor nameCall = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS);
        GETSOCKNAME = linker.downcallHandle(libc.findOrThrow("getsockname"), nameCall, errno);
        GETPEERNAME = linker.downcallHandle(libc.findOrThrow("getpeername"), nameCall, errno);
        SENDTO = linker.downcallHandle(libc.findOrThrow("sendto"),
                FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT), errno);
        RECVFROM = linker.downcallHandle(libc.findOrThrow("recvfrom"),
                FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS), errno);
        SETSOCKOPT = linker.downcallHandle(libc.findOrThrow("setsockopt"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT), errno);
        GETSOCKOPT = linker.downcallHandle(libc.findOrThrow("getsockopt"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), errno);
        CLOSE = linker.downcallHandle(libc.findOrThrow("close"), FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    }

    // Freed by the GC: nothing here outlives a call, and a late call after close() must not touch freed memory.
    private final Arena arena = Arena.ofAuto();
    private final MemorySegment errnoState = arena.allocate(CAPTURE);
    private final MemorySegment sockaddr = arena.allocate(SOCKADDR_SIZE, 8);
    private final MemorySegment peer = arena.allocate(SOCKADDR_SIZE, 8);
    private final MemorySegment length = arena.allocate(JAVA_INT);
    private final MemorySegment intValue = arena.allocate(JAVA_INT);
    private final boolean ipv6;
    private int fd;

    private UdpSocket(int fd, boolean ipv6) {
        this.fd = fd;
        this.ipv6 = ipv6;
    }

    /** A new socket: IPv6 (dual-stack) if {@code ipv6}, else IPv4. */
    static UdpSocket open(boolean ipv6) throws IOException {
        MemorySegment state = Arena.ofAuto().allocate(CAPTURE);
        int fd = (int) invoke(SOCKET, state, ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            throw new IOException("socket(" + (ipv6 ? "AF_INET6" : "AF_INET") + ", SOCK_DGRAM) failed: errno "
                    + (int) ERRNO.get(state, 0L));
        }
        UdpSocket socket = new UdpSocket(fd, ipv6);
        if (ipv6) {
            try {
                socket.setInt(IPPROTO_IPV6, IPV6_V6ONLY, 0);
            } catch (IOException e) {
                socket.close();
                throw e;
            }
        }
        return socket;
    }

    /** An IPv6 (dual-stack) socket where the kernel has IPv6, else an IPv4 one. */
    static UdpSocket openDefault() throws IOException {
        try {
            return open(true);
        } catch (IOException e) {
            return open(false);
        }
    }

    int fd() {
        return fd;
    }

    boolean isOpen() {
        return fd >= 0;
    }

    boolean ipv6() {
        return ipv6;
    }

    void bind(InetSocketAddress address) throws IOException {
        int len = write(sockaddr, address);
        check("bind(" + address + ")", (int) invoke(BIND, errnoState, fd, sockaddr, len));
    }

    void connect(InetSocketAddress address) throws IOException {
        int len = write(sockaddr, address);
        check("connect(" + address + ")", (int) invoke(CONNECT, errnoState, fd, sockaddr, len));
    }

    /** Dissolves the association made by {@link #connect}: connect to an {@code AF_UNSPEC} address. */
    void disconnect() throws IOException {
        sockaddr.fill((byte) 0);
        sockaddr.set(JAVA_SHORT, 0, (short) AF_UNSPEC);
        check("connect(AF_UNSPEC)", (int) invoke(CONNECT, errnoState, fd, sockaddr, SOCKADDR_SIZE));
    }

    /** The bound address, or {@code null} while the kernel has not bound the socket (port 0). */
    InetSocketAddress localAddress() {
        InetSocketAddress a = name(GETSOCKNAME);
        return a == null || a.getPort() == 0 ? null : a;
    }

    /** The connected peer, or {@code null}. */
    InetSocketAddress remoteAddress() {
        return name(GETPEERNAME);
    }

    private InetSocketAddress name(MethodHandle call) {
        if (fd < 0) {
            return null;
        }
        length.set(JAVA_INT, 0, SOCKADDR_SIZE);
        if ((int) invoke(call, errnoState, fd, sockaddr, length) < 0) {
            return null;
        }
        return read(sockaddr);
    }

    /**
     * Sends {@code len} bytes at {@code buffer} to {@code recipient} ({@code null}: to the connected peer).
     * Returns the bytes sent, or -1 when the socket buffer is full (EAGAIN).
     */
    int send(MemorySegment buffer, int len, InetSocketAddress recipient) throws IOException {
        while (true) {
            long n;
            if (recipient == null) {
                n = (long) invoke(SENDTO, errnoState, fd, buffer, (long) len, 0, MemorySegment.NULL, 0);
            } else {
                int addrLen = write(peer, recipient);
                n = (long) invoke(SENDTO, errnoState, fd, buffer, (long) len, 0, peer, addrLen);
            }
            if (n >= 0) {
                return (int) n;
            }
            int errno = errno();
            if (errno == EAGAIN) {
                return -1;
            }
            if (errno != EINTR) {
                throw error("sendto(" + (recipient == null ? remoteAddress() : recipient) + ")", errno);
            }
        }
    }

    /**
     * Receives one datagram into {@code buffer} (at most {@code capacity} bytes; the rest of a longer one is
     * dropped, as by {@code recvfrom}). Returns its length, or -1 when nothing is queued (EAGAIN); the sender is
     * {@link #sender()} until the next call.
     */
    int receive(MemorySegment buffer, int capacity) throws IOException {
        while (true) {
            length.set(JAVA_INT, 0, SOCKADDR_SIZE);
            long n = (long) invoke(RECVFROM, errnoState, fd, buffer, (long) capacity, 0, peer, length);
            if (n >= 0) {
                return (int) n;
            }
            int errno = errno();
            if (errno == EAGAIN) {
                return -1;
            }
            if (errno != EINTR) {
                throw error("recvfrom", errno);
            }
        }
    }

    /** The sender of the datagram {@link #receive} returned last. */
    InetSocketAddress sender() {
        return read(peer);
    }

    void setInt(int level, int option, int value) throws IOException {
        intValue.set(JAVA_INT, 0, value);
        check("setsockopt(" + level + ", " + option + ")",
                (int) invoke(SETSOCKOPT, errnoState, fd, level, option, intValue, (int) JAVA_INT.byteSize()));
    }

    int getInt(int level, int option) throws IOException {
        length.set(JAVA_INT, 0, (int) JAVA_INT.byteSize());
        check("getsockopt(" + level + ", " + option + ")",
                (int) invoke(GETSOCKOPT, errnoState, fd, level, option, intValue, length));
        return intValue.get(JAVA_INT, 0);
    }

    void close() {
        int f = fd;
        if (f < 0) {
            return;
        }
        fd = -1;
        int ignored = (int) invoke(CLOSE, f);
    }

    /** Writes {@code address} as this socket's family of sockaddr; returns its length. */
    private int write(MemorySegment target, InetSocketAddress address) throws IOException {
        if (address.isUnresolved()) {
            throw new UnknownHostException("unresolved address " + address);
        }
        InetAddress ip = address.getAddress();
        target.fill((byte) 0);
        short port = (short) address.getPort();
        target.set(JAVA_SHORT.withOrder(ByteOrder.BIG_ENDIAN), 2, port);
        if (!ipv6) {
            if (!(ip instanceof Inet4Address)) {
                throw new IOException("an IPv4 socket cannot reach the IPv6 address " + address
                        + ": create the channel with SocketProtocolFamily.INET6");
            }
            target.set(JAVA_SHORT, 0, (short) AF_INET);
            MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, target, 4, 4);
            return 16;
        }
        target.set(JAVA_SHORT, 0, (short) AF_INET6);
        byte[] bytes = ip.getAddress();
        if (ip.isAnyLocalAddress()) {
            // 0.0.0.0 on a dual-stack socket means every address of both families: ::
            return SOCKADDR_SIZE;
        }
        if (bytes.length == 4) {
            // IPv4-mapped: ::ffff:a.b.c.d
            target.set(JAVA_BYTE, 8 + 10, (byte) 0xff);
            target.set(JAVA_BYTE, 8 + 11, (byte) 0xff);
            MemorySegment.copy(MemorySegment.ofArray(bytes), 0, target, 8 + 12, 4);
        } else {
            MemorySegment.copy(MemorySegment.ofArray(bytes), 0, target, 8, 16);
            if (ip instanceof Inet6Address v6) {
                target.set(JAVA_INT, 24, v6.getScopeId());
            }
        }
        return SOCKADDR_SIZE;
    }

    private static InetSocketAddress read(MemorySegment source) {
        int family = source.get(JAVA_SHORT, 0);
        int port = Short.toUnsignedInt(source.get(JAVA_SHORT.withOrder(ByteOrder.BIG_ENDIAN), 2));
        try {
            if (family == AF_INET) {
                return new InetSocketAddress(InetAddress.getByAddress(source.asSlice(4, 4).toArray(JAVA_BYTE)), port);
            }
            if (family == AF_INET6) {
                byte[] bytes = source.asSlice(8, 16).toArray(JAVA_BYTE);
                int scope = source.get(JAVA_INT, 24);
                // getByAddress turns an IPv4-mapped address into an Inet4Address, as a dual-stack peer expects.
                InetAddress ip = InetAddress.getByAddress(bytes);
                if (ip instanceof Inet6Address && scope != 0) {
                    ip = Inet6Address.getByAddress(null, bytes, scope);
                }
                return new InetSocketAddress(ip, port);
            }
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
        return null;
    }

    private int errno() {
        return (int) ERRNO.get(errnoState, 0L);
    }

    private void check(String what, int rc) throws IOException {
        if (rc < 0) {
            throw error(what, errno());
        }
    }

    private static IOException error(String what, int errno) {
        if (errno == ECONNREFUSED) {
            return new PortUnreachableException(what + " failed: ICMP port unreachable (ECONNREFUSED)");
        }
        return new IOException(what + " failed: errno " + errno);
    }

    private static Object invoke(MethodHandle handle, Object... args) {
        try {
            return handle.invokeWithArguments(args);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
