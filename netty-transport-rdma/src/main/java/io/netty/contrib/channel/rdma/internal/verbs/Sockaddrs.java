package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/** Conversions between {@link InetSocketAddress} and {@code struct sockaddr_in}/{@code sockaddr_in6}. */
final class Sockaddrs {
    static final short AF_INET = 2;
    static final short AF_INET6 = 10;

    private Sockaddrs() {
    }

    /** A native {@code sockaddr_storage} holding {@code address} (which must be resolved). */
    static MemorySegment allocate(Arena arena, InetSocketAddress address) {
        if (address.isUnresolved()) {
            throw new IllegalArgumentException("unresolved address: " + address);
        }
        MemorySegment storage = arena.allocate(SockaddrStorage.LAYOUT);
        InetAddress ip = address.getAddress();
        if (ip instanceof Inet4Address) {
            SockaddrIn.SIN_FAMILY.set(storage, 0L, AF_INET);
            SockaddrIn.SIN_PORT.set(storage, 0L, (short) address.getPort());
            MemorySegment.copy(ip.getAddress(), 0, storage, JAVA_BYTE, SockaddrIn.SIN_ADDR_OFFSET, 4);
        } else {
            SockaddrIn6.SIN6_FAMILY.set(storage, 0L, AF_INET6);
            SockaddrIn6.SIN6_PORT.set(storage, 0L, (short) address.getPort());
            MemorySegment.copy(ip.getAddress(), 0, storage, JAVA_BYTE, SockaddrIn6.SIN6_ADDR_OFFSET, 16);
            SockaddrIn6.SIN6_SCOPE_ID.set(storage, 0L, ((Inet6Address) ip).getScopeId());
        }
        return storage;
    }

    /** The address in the {@code sockaddr} at {@code sockaddr}, or {@code null} if its family is neither. */
    static InetSocketAddress read(MemorySegment sockaddr) {
        MemorySegment s = sockaddr.reinterpret(SockaddrStorage.SIZE);
        short family = (short) SockaddrStorage.SS_FAMILY.get(s, 0L);
        try {
            if (family == AF_INET) {
                byte[] ip = s.asSlice(SockaddrIn.SIN_ADDR_OFFSET, 4).toArray(JAVA_BYTE);
                int port = Short.toUnsignedInt((short) SockaddrIn.SIN_PORT.get(s, 0L));
                return new InetSocketAddress(InetAddress.getByAddress(ip), port);
            }
            if (family == AF_INET6) {
                byte[] ip = s.asSlice(SockaddrIn6.SIN6_ADDR_OFFSET, 16).toArray(JAVA_BYTE);
                int port = Short.toUnsignedInt((short) SockaddrIn6.SIN6_PORT.get(s, 0L));
                int scope = (int) SockaddrIn6.SIN6_SCOPE_ID.get(s, 0L);
                return new InetSocketAddress(Inet6Address.getByAddress(null, ip, scope), port);
            }
            return null;
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }
}
