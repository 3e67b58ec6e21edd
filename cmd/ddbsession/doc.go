// Command ddbsession operates a ddbsession table from a terminal or a
// script: it creates and checks the table, lists and ends a user's
// sessions, ends every session at once, lists the sessions about to
// expire, deletes expired items where TTL is off or lagging, counts live
// sessions, prints a user's security history, and imports the sessions of
// scs on Redis. It works through the library itself (Manager.CreateTable,
// List, Revoke, RevokeAll, RevokeEveryone, History), the table definition
// the library checks tables against, and its item format's one encoder and
// decoder.
//
//	go install github.com/ddbsession/ddbsession/cmd/ddbsession@latest
//
// It is a package of the library's root module, released with it, and
// needs nothing beyond what the library needs: the standard library and
// the AWS SDK (import speaks Redis's protocol itself).
//
// # Commands
//
//	ddbsession table create              create the table, record its layout, then check it
//	ddbsession table check               check it fits and has TTL on; changes nothing
//	ddbsession sessions list USER        a user's live sessions (the devices page)
//	ddbsession sessions revoke USER ID   end one session
//	ddbsession sessions revoke-all USER  end every session of one user
//	ddbsession sessions revoke-everyone  end every session of every user (asks first)
//	ddbsession sessions expiring         the sessions that expire in a window (expiry index)
//	ddbsession history USER              a user's security history, newest first
//	ddbsession sweep                     delete the library's expired items, paced
//	ddbsession count                     live and revoked sessions, by a paced scan (asks first)
//	ddbsession import -redis ADDR        copy scs's sessions from Redis, paced and resumable
//	ddbsession version                   which build this is (also -version, --version)
//
// Each says what it does, what it prints and an example with -h. The
// version is the build's own: "ddbsession v0.1.0" when installed at a
// release, "(devel)" and the commit for a build from a checkout.
//
// # Configuration
//
// DynamoDB is reached through the AWS SDK's usual configuration
// (config.LoadDefaultConfig): AWS_PROFILE, AWS_REGION, the credential
// chain, and AWS_ENDPOINT_URL_DYNAMODB for a local engine; -region and
// -profile override the first two. Every command takes -table. The table
// and layout flags may come from the environment instead, for scripts:
// DDBSESSION_TABLE for -table, DDBSESSION_EXPIRY_INDEX for -expiry-index,
// and so on; a flag on the command line wins.
//
// The table records its layout, the apps' Config.Layout (docs/item-format.md,
// "The layout record"): the app's CreateTable, or its first read of the
// table, or 'table create' writes it, and every command acts in it, so that
// none can act in another mode than the apps (a RevokeAll that an MREC
// table's sessions do not see, say). The layout flags, one per field of
// ddbsession.Layout, are overrides that must agree with the record:
// -partition-key, -sort-key, -hash-only, -session-prefix,
// -user-sessions-prefix, -ttl-attribute, -version-attribute,
// -credential-attribute, -expiry-index, -expiry-index-shards and -mrec. A
// flag that disagrees is refused before anything is written (exit 5), and
// so is a table that records no layout (release v0.1.0's), but by table
// create, which records the layout the flags give, and table check, which
// reports it.
//
// A local engine (dynalite, for one) takes any credentials and Region:
//
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:PORT AWS_REGION=us-east-1 \
//	AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x ddbsession table check -table app
//
// A USER is the user item's partition key, UserKey.PK, and -sk its sort
// key, UserKey.SK, which a table with a sort key needs:
//
//	ddbsession sessions list -table app USER#alice -sk PROFILE
//
// Flags may come before or after the arguments; "--" ends them, for a
// USER that starts with "-".
//
// # Output
//
// On a terminal, tables aligned in columns, and progress bars on stderr.
// With -json, one JSON object on stdout whose field names each command's
// -h lists and which stay as they are; no progress. Errors go to stderr.
// A command that asks first (revoke-everyone, count) asks only a terminal:
// with stdin from /dev/null or a pipe, as under cron or systemd, it needs
// -yes.
//
// # Exit codes
//
//	0  done
//	1  DynamoDB, the network or the AWS configuration failed
//	2  usage error
//	3  not found: the table, the user or the session
//	4  declined: the confirmation was refused, or could not be asked
//	   (stdin is not a terminal) and -yes was not given
//	5  the table does not fit the layout or the command (sessions
//	   expiring: no expiry index), or records another layout than a
//	   flag gives; a command that acts: it records no layout
//	6  table check: it fits, but TTL is off or on another attribute, or
//	   it records no layout yet; table create: TTL is on another attribute
package main
