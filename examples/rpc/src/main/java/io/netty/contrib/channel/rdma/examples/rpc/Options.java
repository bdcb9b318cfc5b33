package io.netty.contrib.channel.rdma.examples.rpc;

import java.util.Arrays;

/** Command-line options of {@link RpcServer} and {@link RpcClient}. */
final class Options {
    /** Netty's default connect timeout. */
    static final int DEFAULT_CONNECT_TIMEOUT_SECONDS = 30;

    String address = "127.0.0.1";
    int port = 7575;
    int count = 1000;
    int[] sizes = {64, 16 << 10, 256 << 10};
    int connectTimeoutSeconds = DEFAULT_CONNECT_TIMEOUT_SECONDS;

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            switch (arg) {
                case "--address" -> o.address = value(args, ++i, arg);
                case "--port" -> o.port = intValue(arg, value(args, ++i, arg), 0);
                case "--count" -> o.count = intValue(arg, value(args, ++i, arg), 1);
                case "--sizes" -> o.sizes = Arrays.stream(value(args, ++i, arg).split(","))
                        .mapToInt(s -> intValue(arg, s.trim(), 0)).toArray();
                case "--connect-timeout" -> o.connectTimeoutSeconds = intValue(arg, value(args, ++i, arg), 1);
                case "--help", "-h" -> usage(null);
                default -> usage("unknown option " + arg);
            }
        }
        return o;
    }

    private static String value(String[] args, int i, String name) {
        if (i >= args.length) {
            usage(name + " needs a value");
        }
        return args[i];
    }

    private static int intValue(String name, String v, int min) {
        try {
            int n = Integer.parseInt(v);
            if (n < min) {
                usage(name + " must be at least " + min + ", got " + n);
            }
            return n;
        } catch (NumberFormatException e) {
            usage(name + " needs a number, got " + v);
            return 0;
        }
    }

    private static void usage(String error) {
        if (error != null) {
            System.err.println(error);
        }
        System.err.println("options: --address A (127.0.0.1) --port P (7575) --count CALLS (1000)"
                + " --sizes BYTES,BYTES,... (64,16384,262144; client only) --connect-timeout SECONDS (30, Netty's"
                + " default: the connection's whole set-up, rdma_cm's address resolution in it has its own 2 s;"
                + " client only)");
        System.exit(error == null ? 0 : 2);
    }
}
