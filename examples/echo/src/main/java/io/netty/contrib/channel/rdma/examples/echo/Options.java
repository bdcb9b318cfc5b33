package io.netty.contrib.channel.rdma.examples.echo;

import io.netty.channel.IoHandlerFactory;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;

/** Command-line options shared by {@link EchoServer} and {@link EchoClient}. */
final class Options {
    String address = "127.0.0.1";
    int port = 7474;
    int size = 64;
    int count = 10_000;
    int concurrency = 1;
    int threads = 1;
    boolean busyPoll;

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            switch (arg) {
                case "--address" -> o.address = value(args, ++i, arg);
                case "--port" -> o.port = intValue(args, ++i, arg, 0);
                case "--size" -> o.size = intValue(args, ++i, arg, 1);
                case "--count" -> o.count = intValue(args, ++i, arg, 1);
                case "--concurrency" -> o.concurrency = intValue(args, ++i, arg, 1);
                case "--threads" -> o.threads = intValue(args, ++i, arg, 1);
                case "--busy-poll" -> o.busyPoll = true;
                case "--help", "-h" -> usage(null);
                default -> usage("unknown option " + arg);
            }
        }
        return o;
    }

    IoHandlerFactory ioHandlerFactory() {
        return busyPoll ? RdmaIoHandler.newFactory(RdmaIoHandlerConfig.spinning()) : RdmaIoHandler.newFactory();
    }

    private static String value(String[] args, int i, String name) {
        if (i >= args.length) {
            usage(name + " needs a value");
        }
        return args[i];
    }

    private static int intValue(String[] args, int i, String name, int min) {
        String v = value(args, i, name);
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
        System.err.println("options: --address A (127.0.0.1) --port P (7474) --size BYTES (64) --count N (10000)"
                + " --concurrency CONNECTIONS (1) --threads LOOPS (1) --busy-poll");
        System.exit(error == null ? 0 : 2);
    }
}
