// Starts dynalite (the pinned, open-source DynamoDB engine) in memory on a
// free loopback port and prints that port on stdout once it is listening.
// Tables become ACTIVE at once so tests never wait on them.
'use strict';
const dynalite = require('dynalite');

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
const port = Number(process.argv[2] || 0);
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(server.address().port + '\n');
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
