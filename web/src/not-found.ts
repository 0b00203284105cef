// The answer to an address the app has no page for: the shell's heading and links say it all;
// the header's account control keeps the sign-in in reach.
import './account';
